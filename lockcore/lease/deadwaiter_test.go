package lease

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// TestDeadWaiterInFlight: a waiter process killed with a retry in flight,
// sent while the resource was held and run by its backend after the
// release, is handed nothing (the README's "a waiter holds nothing and is
// handed nothing"). A transaction holding the resource's row FOR SHARE
// makes the window certain: the retry waits at its first statement while
// the waiter is killed and the holder releases (a release's FOR SHARE does
// not conflict with it), then runs with the resource free and its client
// gone. Before retries stopped granting, the dead process got the lease.
func TestDeadWaiterInFlight(t *testing.T) {
	e := postgresEnv(t)
	schema := e.where.Schema
	r := Map("dead-in-flight")
	m := e.open(Options{Owner: "holder"})
	h, err := m.Acquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatal(err)
	}
	w := e.where
	w.Task, w.Owner, w.Resource = "hold", "dead-waiter", r.String()
	cmd := helperCmd(t, w)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watch := pgtest.Conn(t)
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		if err := watch.QueryRow(ctxT(t), q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	pgtest.Eventually(t, "the helper waits", func() bool {
		return count("SELECT count(*) FROM "+schema+".dal_waiters WHERE lock_id = $1 AND owner = 'dead-waiter'", r.String()) == 1
	})

	block := pgtest.Conn(t)
	tx, err := block.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxT(t), "SELECT 1 FROM "+schema+".dal_resources WHERE lock_id = $1 FOR SHARE", r.String()); err != nil {
		t.Fatal(err)
	}
	// The helper's next retry (on its backoff: well under a second) queues
	// on the row. Its backend is the one waiting for a lock on the schema's
	// tables.
	var pid int32
	pgtest.Eventually(t, "the helper's retry waits for the resource's row", func() bool {
		err := watch.QueryRow(ctxT(t), `SELECT pid FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'.dal_resources%'`, schema).Scan(&pid)
		return err == nil
	})
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: its retry stays in flight
		t.Fatal(err)
	}
	cmd.Wait()
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// The retry runs now; its backend ends once it finds its client gone.
	pgtest.Eventually(t, "the dead helper's backend ends", func() bool {
		return count("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid) == 0
	})
	if n := count("SELECT count(*) FROM "+schema+".dal_locks WHERE lock_id = $1", r.String()); n != 0 {
		locks, _ := m.Locks(ctxT(t))
		t.Fatalf("the dead waiter's retry was granted: %d grants of %s after its holder released: %+v", n, r, locks)
	}
	l, err := m.TryAcquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatalf("TryAcquire after the dead waiter's retry: %v", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// TestDeadWaiterInFlightSQLite: on SQLite, a waiter process killed in the
// middle of a retry, its write transaction open, is handed nothing and
// holds nothing: once its holder releases, a writer gets the resource at
// once (no grant for the dead process, and its transaction no longer
// holds the file: SQLite rolls it back, the file locks die with the
// process), and its waiter row holds back readers only until it lapses.
// The kill lands while a probe of the file's write lock (BEGIN IMMEDIATE
// without a busy timeout) finds it taken, which only the waiter's retries
// take then (the holder's heartbeat is rarer than the test); each of the
// rounds kills a new waiter.
func TestDeadWaiterInFlightSQLite(t *testing.T) {
	e := sqliteEnv(t)
	r := Map("dead-in-flight")
	m := e.open(Options{Owner: "holder", Lease: 30 * time.Second, Heartbeat: 10 * time.Second})
	probe, err := sql.Open("sqlite", "file:"+e.where.Path+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	probe.SetMaxOpenConns(1)
	midRetry := func() bool {
		tx, err := probe.BeginTx(ctxT(t), nil)
		if err == nil {
			_ = tx.Rollback()
			return false
		}
		if !errors.Is(busy(err), ErrBusy) {
			t.Fatal(err)
		}
		return true
	}
	for round := range 3 {
		h := acquire(t, ctxT(t), m, r, Write)
		w := e.where
		// A short lease: the waiter retries every 50ms at most.
		w.Task, w.Owner, w.Resource, w.Lease = "hold", "dead-waiter", r.String(), 500*time.Millisecond
		cmd := helperCmd(t, w)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pgtest.Eventually(t, "the helper waits", func() bool {
			infos, err := m.Locks(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(infos, func(i Info) bool { return !i.Granted && i.Owner == "dead-waiter" })
		})
		pgtest.Eventually(t, "the helper's retry holds the file's write lock", midRetry)
		if err := cmd.Process.Kill(); err != nil { // SIGKILL, its transaction open
			t.Fatal(err)
		}
		cmd.Wait()
		release(t, h)
		l, err := m.TryAcquire(ctxT(t), r, Write)
		if err != nil {
			t.Fatalf("round %d: TryAcquire after the waiter was killed mid-retry: %v", round, err)
		}
		for _, in := range holding(t, m, r) {
			if in.Owner == "dead-waiter" {
				t.Fatalf("round %d: the dead waiter holds %s: %+v", round, r, in)
			}
		}
		release(t, l)
	}
	pgtest.Eventually(t, "the dead writers' rows lapse and a reader gets in", func() bool {
		l, err := m.TryAcquire(ctxT(t), r, Read)
		if errors.Is(err, ErrLocked) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		release(t, l)
		return true
	})
}
