//go:build attack

package redislocks

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
)

// Attack: on a cluster, every node's script cache flushed over and over
// while Read runs (a flush between a page's EVALSHA and its EVAL re-read,
// or between pages): every read lists every waiter.
func TestAttackReadQueuesWhileFlushing(t *testing.T) {
	ctx := context.Background()
	cc := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	h := locker(t, cc, redislock.Options{Prefix: prefix, Owner: "holder"})
	w := locker(t, cc, redislock.Options{Prefix: prefix, Owner: "waiter"})
	const n = 9
	var holds []*redislock.Lock
	var wg sync.WaitGroup
	wctx, stopWaiters := context.WithCancel(ctx)
	for i := range n {
		k, err := h.Acquire(ctx, fmt.Sprintf("k%d", i), lockcore.TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, k)
		wg.Go(func() {
			if k, err := w.Acquire(wctx, fmt.Sprintf("k%d", i), lockcore.Wait(time.Minute)); err == nil {
				_ = k.Release(ctx)
			}
		})
	}
	defer func() {
		stopWaiters()
		for _, k := range holds {
			_ = k.Release(ctx)
		}
		wg.Wait()
	}()
	waiters := func() (int, int) {
		tbl, err := Read(ctx, cc, prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		ws := 0
		for _, in := range tbl.Locks {
			ws += len(in.Waiters)
		}
		return len(tbl.Locks), ws
	}
	pgtest.Eventually(t, "every key has its waiter", func() bool { l, w := waiters(); return l == n && w == n })
	stop := make(chan struct{})
	var flushes sync.WaitGroup
	flushes.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.ScriptFlush(ctx).Err() })
		}
	})
	for i := range 300 {
		if l, ws := waiters(); l != n || ws != n {
			t.Errorf("read %d: %d locks, %d waiters; want %d and %d", i, l, ws, n, n)
		}
	}
	close(stop)
	flushes.Wait()
}
