package poolstats_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/poolstats"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A waiter blocked on a full pool is counted while it waits, and Of reports
// the pool's figures with it.
func TestWaitersAndOf(t *testing.T) {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	var w poolstats.Waiters
	ctx := context.Background()
	held, err := w.Acquire(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		c, err := w.Acquire(ctx, pool)
		if err == nil {
			c.Release()
		}
		got <- err
	}()
	pgtest.Eventually(t, "the second acquire waits", func() bool { return w.Count() == 1 })
	ps := poolstats.Of("lock", pool, w.Count())
	if ps.Name != "lock" || ps.MaxConns != 1 || ps.InUse != 1 || ps.Waiting != 1 || ps.Total != 1 {
		t.Errorf("Of = %+v", ps)
	}
	held.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if w.Count() != 0 {
		t.Errorf("Count = %d after both acquires returned", w.Count())
	}
}
