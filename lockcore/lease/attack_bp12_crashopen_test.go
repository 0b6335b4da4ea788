//go:build attack

package lease

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// TestAttackCrashAfterOpen: a server that commits asynchronously crashes
// (an immediate stop) right after OpenPostgres created its tables, then
// again after a grant and release. What OpenPostgres reported done
// survives: the tables are there after the crash (the package's promise
// that what the store reported done survives a crash; a Manager whose
// tables the crash took back failed every call, 42P01, until opened
// again). And the README's "a request that found its pooled connection's
// session ended before it ran (a server crash ...) [is retried] on
// another connection", with the pool's idle connections dead and not
// pinged (pgxpool pings only those idle over a second), both before and
// after they prepared the acquire's statements.
func TestAttackCrashAfterOpen(t *testing.T) {
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "off", "autovacuum": "off",
	}})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	cfg, err := pgxpool.ParseConfig(c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Schema: "bp12_idle"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for round, what := range []string{"statements not yet prepared", "statements prepared"} {
		if err := c.Crash(ctxT(t)); err != nil {
			t.Fatalf("crash: %v", err)
		}
		// A resource of its own each round: a release the crash took back
		// brings its row back, stale once its lease has passed (README).
		l, err := m.TryAcquire(ctxT(t), Map(fmt.Sprintf("m%d", round)), Write)
		if err != nil {
			t.Fatalf("round %d (%s): TryAcquire after the crash: %v", round, what, err)
		}
		if err := l.Release(ctxT(t)); err != nil {
			t.Fatalf("round %d (%s): Release: %v", round, what, err)
		}
	}
}
