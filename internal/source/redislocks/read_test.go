package redislocks

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/lockcore/registry"
)

func locker(t *testing.T, rdb redis.UniversalClient, opts redislock.Options) *redislock.Locker {
	t.Helper()
	l := redislock.New(rdb, opts)
	t.Cleanup(func() { l.Close() })
	return l
}

// Read lists held locks with owner, fence, token prefix, TTL and the
// waiters in order, reading with SCAN under the prefix only.
func TestRead(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := locker(t, rdb, redislock.Options{Prefix: prefix, Owner: "holder"})
	ctx := context.Background()
	if tbl, err := Read(ctx, rdb, prefix, 0); err != nil || len(tbl.Locks) != 0 || tbl.Truncated {
		t.Fatalf("Read with nothing held = %+v, %v", tbl, err)
	}
	var locks []*redislock.Lock
	for i := range 5 {
		k, err := l.Acquire(ctx, fmt.Sprintf("k%d", i), lockcore.TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, k)
	}
	// Something else under the prefix, and a lock under another prefix.
	rdb.Set(ctx, prefix+"note", "x", time.Minute)
	locker(t, rdb, redislock.Options{Prefix: redistest.Prefix(t)}).Acquire(ctx, "elsewhere")

	w := locker(t, redistest.Client(t), redislock.Options{Prefix: prefix, Owner: "waiter"})
	done := make(chan error, 1)
	go func() {
		k, err := w.Acquire(ctx, "k0", lockcore.Wait(30*time.Second))
		if err == nil {
			err = k.Release(ctx)
		}
		done <- err
	}()
	var ws []Waiter
	pgtest.Eventually(t, "k0 has a waiter", func() bool {
		tbl, err := Read(ctx, rdb, prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		ws = nil
		if len(tbl.Locks) > 0 && tbl.Locks[0].Key == "k0" {
			ws = tbl.Locks[0].Waiters
		}
		return len(ws) == 1
	})
	if ws[0].Owner != "waiter" || len(ws[0].Token) != 6 || time.Since(ws[0].Since) > time.Minute {
		t.Errorf("waiter %+v", ws[0])
	}

	tbl, err := Read(ctx, rdb, prefix, 0)
	if err != nil || len(tbl.Locks) != 5 || tbl.Truncated || time.Since(tbl.Taken).Abs() > time.Minute {
		t.Fatalf("Read = %d locks (truncated %v, taken %v), %v; want 5", len(tbl.Locks), tbl.Truncated, tbl.Taken, err)
	}
	for i, in := range tbl.Locks {
		k := locks[i]
		if in.Key != k.Key() || in.Owner != "holder" || in.Fence != k.Fence() || in.Token != k.Token()[:6] ||
			in.TTL <= 0 || in.TTL > time.Minute || time.Since(in.Since) > time.Minute || in.Pattern != registry.OtherPattern {
			t.Errorf("info %d = %+v; lock %s fence %d", i, in, k.Key(), k.Fence())
		}
	}
	if lim, err := Read(ctx, rdb, prefix, 2); err != nil || len(lim.Locks) != 2 || !lim.Truncated {
		t.Errorf("Read with limit 2 = %d locks (truncated %v), %v", len(lim.Locks), lim.Truncated, err)
	}
	if all, err := Read(ctx, rdb, prefix, 5); err != nil || len(all.Locks) != 5 {
		t.Errorf("Read with limit 5 = %d locks, %v", len(all.Locks), err)
	}
	locks[0].Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
