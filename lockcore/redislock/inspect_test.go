package redislock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/redistest"
)

// Inspect lists held locks with owner, fence, token prefix, TTL and the
// waiters in order, reading with SCAN under the prefix only.
func TestInspect(t *testing.T) {
	l := newLocker(t, Options{Owner: "holder"})
	ctx := context.Background()
	if infos, err := l.Inspect(ctx, 0); err != nil || len(infos) != 0 {
		t.Fatalf("Inspect with nothing held = %v, %v", infos, err)
	}
	var locks []*Lock
	for i := range 5 {
		k, err := l.Acquire(ctx, fmt.Sprintf("k%d", i), TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, k)
	}
	// Something else under the prefix, and a lock under another prefix.
	rdb := redistest.Client(t)
	rdb.Set(ctx, l.prefix+"note", "x", time.Minute)
	newLocker(t, Options{}).Acquire(ctx, "elsewhere")

	w := lockerOn(t, redistest.Client(t), Options{Prefix: l.prefix, Owner: "waiter"})
	done := make(chan error, 1)
	go func() {
		k, err := w.Acquire(ctx, "k0", Wait(30*time.Second))
		if err == nil {
			err = k.Release(ctx)
		}
		done <- err
	}()
	ws := waitForWaiters(t, l, "k0", 1)
	if ws[0].Owner != "waiter" || len(ws[0].Token) != 6 || time.Since(ws[0].Since) > time.Minute {
		t.Errorf("waiter %+v", ws[0])
	}

	infos, err := Inspect(ctx, rdb, l.prefix, 0)
	if err != nil || len(infos) != 5 {
		t.Fatalf("Inspect = %d locks, %v; want 5", len(infos), err)
	}
	for i, in := range infos {
		k := locks[i]
		if in.Key != k.Key() || in.Owner != "holder" || in.Fence != k.Fence() || in.Token != k.Token()[:6] ||
			in.TTL <= 0 || in.TTL > time.Minute || time.Since(in.Since) > time.Minute || in.Pattern != otherPattern {
			t.Errorf("info %d = %+v; lock %s fence %d", i, in, k.Key(), k.Fence())
		}
	}
	if limited, err := Inspect(ctx, rdb, l.prefix, 2); err != nil || len(limited) != 2 {
		t.Errorf("Inspect with limit 2 = %d locks, %v", len(limited), err)
	}
	locks[0].Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
