package sim

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// pgxpool destroys a connection released broken or mid-transaction on a
// goroutine of its own, and counts it as checked out until then: on a
// loaded machine the final leak check can come first. Here such a close on
// the work pool is held up until the leak check has seen the connection
// checked out; the check must wait for it, not report a leak. (lockcore
// takes its own failed connections out of the pool at once, so the lock
// pool no longer does this.)
//
// Not parallel: it sets the package's test hooks.
func TestLeakCheckWaitsForClosingConnections(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	poolConfig = func(c *pgxpool.Config) {
		if c.ConnConfig.RuntimeParams["application_name"] == AppWork {
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

	// A work connection released inside a transaction: pgxpool destroys it.
	c, err := s.workPool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	c.Release()
	if n := s.workPool.Stat().AcquiredConns(); n != 1 {
		t.Fatalf("%d work connections checked out, want the one being closed", n)
	}

	if err := s.finish(); err != nil {
		t.Fatal(err)
	}
	if r := s.Report(); !r.OK {
		t.Errorf("the final checks: %v", r.Invariants)
	}
}
