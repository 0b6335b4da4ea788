package redislock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/lockcore"
)

// The monitor reads at most redislocks.MaxWaiters waiters of a lock, in order, and says
// when the queue holds more.
func TestReadBoundsWaiters(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	for i := range redislocks.MaxWaiters + 5 {
		registerWaiter(t, l, "k", fmt.Sprintf("W%03d", i), time.Minute)
	}
	tbl, err := inspect(ctx, l, 0)
	if err != nil || len(tbl.Locks) != 1 {
		t.Fatalf("Read = %+v, %v", tbl, err)
	}
	in := tbl.Locks[0]
	if len(in.Waiters) != redislocks.MaxWaiters || !in.MoreWaiters {
		t.Fatalf("%d waiters listed (more: %v), want %d and more", len(in.Waiters), in.MoreWaiters, redislocks.MaxWaiters)
	}
	for i, w := range in.Waiters {
		if want := fmt.Sprintf("W%03d", i); w.Token != want || w.Owner != "ghost" {
			t.Errorf("waiter %d = %+v, want %s by ghost", i, w, want)
		}
	}
}
