package lease

import (
	"context"
	"testing"

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
