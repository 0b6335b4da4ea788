//go:build attack

package lockcore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/lockcore"
)

// TestAttackCrashWithHolderAndWaiter: TestLossOnRestart with a crash (an
// immediate stop: the backends send a WARNING, not a FATAL, and die) of a
// server committing asynchronously, a holder and a waiter of another
// Service queued behind it. The holder's lock is lost (Done, ErrLost); the
// waiter is never granted while the holder has not been told; after the
// restart the holder's Service takes the key again although its pool's
// idle connections died (no pings), fence above every earlier one.
func TestAttackCrashWithHolderAndWaiter(t *testing.T) {
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "off", "wal_writer_delay": "10s", "autovacuum": "off",
	}})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	service := func() *lockcore.Service {
		cfg, err := pgxpool.ParseConfig(c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 4
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return lockcore.New(pool)
	}
	sa, sb := service(), service()
	key := freshAgent()
	// Fences before the crash: grants on both Services, one idle
	// connection each left in the pools.
	var fences []int64
	for _, s := range []*lockcore.Service{sa, sb, sa} {
		l, err := s.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		fences = append(fences, l.Fence())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	a, err := sa.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	fences = append(fences, a.Fence())
	type grant struct {
		l      *lockcore.Lock
		err    error
		aEnded bool
	}
	got := make(chan grant, 1)
	go func() {
		l, err := sb.Acquire(ctx, key, lockcore.Wait(time.Minute))
		g := grant{l: l, err: err}
		select {
		case <-a.Done():
			g.aEnded = true
		default:
		}
		got <- g
	}()
	mon := clusterPool(t, c)
	deadline := time.Now().Add(guard)
	for {
		var n int
		if err := mon.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not queue")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Crash(ctx); err != nil {
		t.Fatalf("crash: %v", err)
	}
	waitDone(t, a, "crash")
	if !errors.Is(a.Err(), lockcore.ErrLost) {
		t.Errorf("the holder after the crash: Err %v, want ErrLost", a.Err())
	}
	var b *lockcore.Lock
	select {
	case g := <-got:
		if g.err == nil && !g.aEnded {
			t.Fatalf("the waiter was granted (fence %d) before the holder was told its lock was lost", g.l.Fence())
		}
		t.Logf("the waiter across the crash: fence %d, %v", fenceOf(g.l), g.err)
		b = g.l
	case <-time.After(guard):
		t.Fatal("the waiter's Acquire still under way 30s after the restart")
	}
	if b != nil {
		fences = append(fences, b.Fence())
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range []*lockcore.Service{sa, sb} {
		l, err := s.Acquire(ctx, key, lockcore.Wait(10*time.Second))
		if err != nil {
			t.Fatalf("Service %d's acquire after the crash: %v", i, err)
		}
		fences = append(fences, l.Fence())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("fences %v", fences)
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fences %v: not strictly increasing", fences)
		}
	}
}

func fenceOf(l *lockcore.Lock) int64 {
	if l == nil {
		return 0
	}
	return l.Fence()
}

// clusterPool returns a pool of c for the test's own queries.
func clusterPool(t *testing.T, c *pgcluster.Cluster) *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}
