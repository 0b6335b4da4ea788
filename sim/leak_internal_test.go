package sim

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/workers"
)

// A lock timeout destroys its connection, which pgxpool closes on a
// goroutine of its own and counts as checked out until then: on a loaded
// machine the final leak check can come first. Here the close is held up
// until the leak check has seen the connection checked out; the check must
// wait for it, not report a leak.
//
// Not parallel: it sets the package's test hooks.
func TestLeakCheckWaitsForClosingConnections(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	poolConfig = func(c *pgxpool.Config) {
		if c.ConnConfig.RuntimeParams["application_name"] == AppLock {
			c.BeforeClose = func(*pgx.Conn) { <-gate }
		}
	}
	settleWait = open
	t.Cleanup(func() { poolConfig, settleWait = nil, nil })

	ctx := context.Background()
	s, err := New(ctx, Options{DSN: pgtest.DSN(t), Schema: "leak_settle", Scenario: "config-race",
		WorkMinConns: 2, ConfigPath: t.TempDir() + "/config.json"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	t.Cleanup(open) // before Close, which closes connections too

	// Someone else holds AGENT 1: the hook times out, and its lock
	// connection is destroyed.
	other := pgtest.Pool(t, nil)
	held, err := other.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec(ctx, "SELECT pg_advisory_lock(1, 1)"); err != nil {
		t.Fatal(err)
	}
	s.env.SetLockTimeout(100 * time.Millisecond)
	if err := s.env.Hook(ctx, workers.RouteNotification, 1); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("hook on a held agent: %v, want ErrTimeout", err)
	}
	if _, err := held.Exec(ctx, "SELECT pg_advisory_unlock(1, 1)"); err != nil {
		t.Fatal(err)
	}
	held.Release()
	if n := s.lockPool.Stat().AcquiredConns(); n != 1 {
		t.Fatalf("%d lock connections checked out, want the one being closed", n)
	}

	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	if r := s.Report(); !r.OK {
		t.Errorf("the final checks: %v", r.Invariants)
	}
}
