package redislock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// Inspect lists held locks with owner, fence, token prefix, TTL and the
// waiters in order, reading with SCAN under the prefix only.
func TestInspect(t *testing.T) {
	l := newLocker(t, Options{Owner: "holder"})
	ctx := context.Background()
	if tbl, err := l.Inspect(ctx, 0); err != nil || len(tbl.Locks) != 0 || tbl.Truncated {
		t.Fatalf("Inspect with nothing held = %+v, %v", tbl, err)
	}
	var locks []*Lock
	for i := range 5 {
		k, err := l.Acquire(ctx, fmt.Sprintf("k%d", i), lockcore.TTL(time.Minute))
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
		k, err := w.Acquire(ctx, "k0", lockcore.Wait(30*time.Second))
		if err == nil {
			err = k.Release(ctx)
		}
		done <- err
	}()
	ws := waitForWaiters(t, l, "k0", 1)
	if ws[0].Owner != "waiter" || len(ws[0].Token) != 6 || time.Since(ws[0].Since) > time.Minute {
		t.Errorf("waiter %+v", ws[0])
	}

	tbl, err := Inspect(ctx, rdb, l.prefix, 0)
	if err != nil || len(tbl.Locks) != 5 || tbl.Truncated || time.Since(tbl.Taken).Abs() > time.Minute {
		t.Fatalf("Inspect = %d locks (truncated %v, taken %v), %v; want 5", len(tbl.Locks), tbl.Truncated, tbl.Taken, err)
	}
	for i, in := range tbl.Locks {
		k := locks[i]
		if in.Key != k.Key() || in.Owner != "holder" || in.Fence != k.Fence() || in.Token != k.Token()[:6] ||
			in.TTL <= 0 || in.TTL > time.Minute || time.Since(in.Since) > time.Minute || in.Pattern != otherPattern {
			t.Errorf("info %d = %+v; lock %s fence %d", i, in, k.Key(), k.Fence())
		}
	}
	if lim, err := Inspect(ctx, rdb, l.prefix, 2); err != nil || len(lim.Locks) != 2 || !lim.Truncated {
		t.Errorf("Inspect with limit 2 = %d locks (truncated %v), %v", len(lim.Locks), lim.Truncated, err)
	}
	if all, err := Inspect(ctx, rdb, l.prefix, 5); err != nil || len(all.Locks) != 5 {
		t.Errorf("Inspect with limit 5 = %d locks, %v", len(all.Locks), err)
	}
	locks[0].Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Inspect reads at most MaxWaiters waiters of a lock, in order, and says
// when the queue holds more.
func TestInspectBoundsWaiters(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	for i := range MaxWaiters + 5 {
		registerWaiter(t, l, "k", fmt.Sprintf("W%03d", i), time.Minute)
	}
	tbl, err := l.Inspect(ctx, 0)
	if err != nil || len(tbl.Locks) != 1 {
		t.Fatalf("Inspect = %+v, %v", tbl, err)
	}
	in := tbl.Locks[0]
	if len(in.Waiters) != MaxWaiters || !in.MoreWaiters {
		t.Fatalf("%d waiters listed (more: %v), want %d and more", len(in.Waiters), in.MoreWaiters, MaxWaiters)
	}
	for i, w := range in.Waiters {
		if want := fmt.Sprintf("W%03d", i); w.Token != want || w.Owner != "ghost" {
			t.Errorf("waiter %d = %+v, want %s by ghost", i, w, want)
		}
	}
}
