package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// TestSettleRights (PostgreSQL): settle, as a role with no privilege,
// ends a backend of its own role and waits until it is gone, and on a
// backend of a role it may not end it logs a warning with the server's
// refusal and returns, leaving the backend alone (the acquire then cleans
// up at once, as the README says).
func TestSettleRights(t *testing.T) {
	plain := pgtest.Role(t, fmt.Sprintf("lease_settle_%d", os.Getpid()), "pw-settle")
	other := pgtest.Role(t, fmt.Sprintf("lease_other_%d", os.Getpid()), "pw-other")
	cfg, err := pgxpool.ParseConfig(plain)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var logged bytes.Buffer
	p := &pgStore{pool: pool, log: slog.New(slog.NewTextHandler(&logged, nil))}
	connect := func(dsn string) *pgx.Conn {
		c, err := pgx.Connect(ctxT(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctxT(t)) })
		return c
	}
	alive := func(pid uint32) bool {
		var n int
		if err := pgtest.Conn(t).QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	own := connect(plain).PgConn().PID()
	p.settle(own)
	if alive(own) || logged.Len() > 0 {
		t.Fatalf("settle on a backend of its own role: still alive %v, logged %q", alive(own), logged.String())
	}

	theirs := connect(other).PgConn().PID()
	p.settle(theirs)
	if !alive(theirs) {
		t.Fatal("settle ended a backend of another role")
	}
	if !strings.Contains(logged.String(), "ending the backend of an abandoned request failed") || !strings.Contains(logged.String(), "42501") {
		t.Fatalf("logged %q, want the warning with SQLSTATE 42501", logged.String())
	}
}

// An acquire whose context ends while it waits for a connection of a busy
// pool sent nothing: it returns with its context's error at once, not after
// a cleanup that queues on the same pool for cleanupTimeout, and leaves
// nothing behind.
func TestCancelQueuedOnPoolReturnsAtOnce(t *testing.T) {
	e := postgresEnv(t)
	holder := e.open(Options{Owner: "holder"})
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	w, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Owner: "queued", Schema: e.where.Schema}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	busy, err := pool.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release()
	r := Map("queued-on-pool")
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := w.Acquire(ctx, r, Write)
		done <- err
	}()
	pgtest.Eventually(t, "the acquire waits for the pool", func() bool { return pool.Stat().EmptyAcquireCount() > 0 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire: %v, want context.Canceled", err)
		}
	case <-time.After(cleanupTimeout * 3 / 4): // short of the old cleanup's wait; not a speed check
		t.Fatalf("Acquire still waiting %s after its context ended, with nothing sent", cleanupTimeout*3/4)
	}
	busy.Release()
	if len(holding(t, holder, r)) > 0 || waiting(t, holder, r, Write) {
		t.Fatal("left behind")
	}
}
