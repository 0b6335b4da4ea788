package lockcore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/lockcore"
)

// crashable is a lock store that a test can crash and bring back.
type crashable struct {
	// checkpoint makes what the store holds durable as of now, so that a
	// crash loses only what comes after it; nil if the store has no such
	// step.
	checkpoint func(t *testing.T)
	// crash ends the store as a crash would and starts it again.
	crash func(t *testing.T)
}

// grantFence takes a lock on one key, releases it, and returns the fence
// of the grant. After a crash it must connect again on its own.
type grantFence func(ctx context.Context) (int64, error)

// fencesIncreaseAcrossCrash checks that every grant's fence is above every
// earlier one's across a crash of the store: one grant, a checkpoint, five
// grants, the crash, three grants. It takes the lock kind as a function so
// that the family's conformance suite can run it for every kind whose store
// can crash.
func fencesIncreaseAcrossCrash(t *testing.T, store crashable, grant grantFence) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var fences []int64
	step := func(n int, what string) {
		t.Helper()
		for range n {
			f, err := grant(ctx)
			if err != nil {
				t.Fatalf("grant %s: %v", what, err)
			}
			if len(fences) > 0 && f <= fences[len(fences)-1] {
				t.Fatalf("grant %s: fence %d not above the earlier ones %v", what, f, fences)
			}
			fences = append(fences, f)
		}
	}
	step(1, "before the checkpoint")
	if store.checkpoint != nil {
		store.checkpoint(t)
	}
	step(5, "after the checkpoint")
	store.crash(t)
	step(3, "after the crash")
	t.Logf("fences %v", fences)
}

// Fences strictly increase across a server crash even when the server
// commits asynchronously: the nextval that minted a fence must be durable
// before the grant is reported, or a crash hands out the same fences again
// (fault 1 of issue 32: 2, 3, 4 after 2..6).
func TestFencesIncreaseAcrossCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// synchronous_commit off is what the fault needs. A walwriter that wakes
	// every 10s, and no autovacuum, leave the WAL of the last grants in the
	// server's buffers until the crash, as a busy server's last 200ms would.
	c, err := pgcluster.Start(ctx, pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "off", "wal_writer_delay": "10s", "autovacuum": "off",
	}})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	store := crashable{
		checkpoint: func(t *testing.T) {
			t.Helper()
			pool := clusterPool(t, c, 1)
			if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
				t.Fatalf("CHECKPOINT: %v", err)
			}
		},
		crash: func(t *testing.T) {
			t.Helper()
			if err := c.Crash(ctx); err != nil {
				t.Fatalf("crash: %v", err)
			}
		},
	}
	for _, tc := range []struct {
		name string
		opts []lockcore.Option
		try  bool
	}{
		{"acquire", nil, false},
		{"try", nil, true},
		{"shared pool acquire", []lockcore.Option{lockcore.SharedPool()}, false},
		{"shared pool try", []lockcore.Option{lockcore.SharedPool()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := lockcore.New(clusterPool(t, c, 2), tc.opts...)
			key := freshAgent()
			fencesIncreaseAcrossCrash(t, store, func(ctx context.Context) (int64, error) {
				var l *lockcore.Lock
				var err error
				if tc.try {
					l, err = s.TryAcquire(ctx, key)
				} else {
					l, err = s.Acquire(ctx, key)
				}
				if err != nil {
					return 0, err
				}
				return l.Fence(), l.Release(ctx)
			})
		})
	}
}

// clusterPool opens a pool of at most maxConns connections on c's postgres
// database, closed when the test ends.
func clusterPool(t *testing.T, c *pgcluster.Cluster, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
