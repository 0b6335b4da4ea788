//go:build attack

package lease

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// abandonCase runs TestAbandonedRequestLeavesNothing's "grant" scenario
// (the acquire's first request waits for the resource's row, held FOR
// SHARE) with a pool configured by cfg, and abandons the request by
// abandon (given the blocked backend's pid). It returns the Acquire's
// error and how long after the abandonment it returned.
func abandonCase(t *testing.T, cfg func(*pgxpool.Config), abandon func(pid int32, cancel context.CancelFunc), returned func(), wantClean bool) (error, time.Duration) {
	e := postgresEnv(t)
	holder := e.open(Options{Owner: "holder"})
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		dropCancels("lease-abandoner")(c)
		if cfg != nil {
			cfg(c)
		}
	})
	w, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Owner: "abandoner", Schema: e.where.Schema}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	r := Map("abandoned")
	release(t, acquire(t, ctxT(t), holder, r, Write))
	watch := pgtest.Conn(t)
	tx, err := pgtest.Conn(t).Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxT(t), "SELECT 1 FROM "+e.where.Schema+".dal_resources WHERE lock_id = $1 FOR SHARE", r.String()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		l, err := w.Acquire(ctx, r, Write)
		if err == nil {
			_ = l.Release(context.Background())
		}
		done <- err
	}()
	var pid int32
	pgtest.Eventually(t, "the acquire's request waits for the resource's row", func() bool {
		return watch.QueryRow(ctxT(t), `SELECT pid FROM pg_stat_activity
			WHERE application_name = 'lease-abandoner' AND wait_event_type = 'Lock'`).Scan(&pid) == nil
	})
	start := time.Now()
	abandon(pid, cancel)
	var aerr error
	select {
	case aerr = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("Acquire has not returned 25s after its request was abandoned")
	}
	took := time.Since(start)
	if returned != nil {
		returned()
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "the abandoned request's backend ends", func() bool {
		var n int
		if err := watch.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	pgtest.Eventually(t, "no settle connection is left open", func() bool {
		var n int
		if err := watch.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'locktop.lease.settle'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	infos, err := holder.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Resource == r && wantClean {
			t.Errorf("left behind: granted %v, owner %s (Acquire: %v after %v)", in.Granted, in.Owner, aerr, took)
		}
	}
	return aerr, took
}

// Attack: a pool of one connection. settle needs a connection of the pool
// while the abandoned one is being destroyed.
func TestAttackAbandonMaxConns1(t *testing.T) {
	err, took := abandonCase(t, func(c *pgxpool.Config) { c.MaxConns = 1 }, func(_ int32, cancel context.CancelFunc) { cancel() }, nil, true)
	t.Logf("Acquire: %v after %v", err, took)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire: %v, want context.Canceled", err)
	}
}

// Attack: the connection fails (closed under pgx) rather than the context
// ending: the server still runs the request.
func TestAttackAbandonConnFails(t *testing.T) {
	var mu sync.Mutex
	conns := map[uint32]net.Conn{}
	err, took := abandonCase(t, func(c *pgxpool.Config) {
		c.AfterConnect = func(_ context.Context, pc *pgx.Conn) error {
			mu.Lock()
			defer mu.Unlock()
			conns[pc.PgConn().PID()] = pc.PgConn().Conn()
			return nil
		}
	}, func(pid int32, _ context.CancelFunc) {
		mu.Lock()
		defer mu.Unlock()
		c := conns[uint32(pid)]
		if c == nil {
			t.Fatalf("no connection of pid %d", pid)
		}
		c.Close()
	}, nil, true)
	t.Logf("Acquire: %v after %v", err, took)
	if err == nil {
		t.Fatal("Acquire succeeded on a failed connection")
	}
}

// Attack: the server cannot be reached once the request is abandoned (a
// frozen proxy: new connections hang). How long does Acquire take to
// return after its context ended? The README: "an abandoned acquire
// returns a few round trips after its deadline"; settle and tidy each wait
// up to cleanupTimeout.
func TestAttackAbandonServerUnreachable(t *testing.T) {
	px := pgtest.NewProxy(t, pgtest.DSN(t))
	err, took := abandonCase(t, func(c *pgxpool.Config) {
		cc, perr := pgxpool.ParseConfig(px.DSN())
		if perr != nil {
			t.Fatal(perr)
		}
		c.ConnConfig.Config.Host, c.ConnConfig.Config.Port = cc.ConnConfig.Host, cc.ConnConfig.Port
		c.ConnConfig.Fallbacks = nil
		c.ConnConfig.TLSConfig = nil
	}, func(_ int32, cancel context.CancelFunc) {
		px.Freeze()
		cancel()
	}, px.Thaw, false) // what commits later stays: documented
	t.Logf("Acquire: %v after %v", err, took)
	if took > 2*cleanupTimeout+time.Second {
		t.Errorf("Acquire returned %v after its context ended, more than settle's and tidy's timeouts", took)
	}
}
