package workers_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// The storage side of fencing, in SQL: a write's fence check holds the
// agent's row until the write commits, so a section entering with a newer
// fence waits for it; once the newer fence is in, the older one is
// refused.
func TestFenceCheckSerialisesWithTheRaise(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	if _, err := w.work.Exec(ctx, "UPDATE agents SET fence = 5 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	tx, err := w.work.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT check_fence(1, 5)"); err != nil {
		t.Fatalf("the current fence refused: %v", err)
	}
	entered := goErr(func() error {
		_, err := w.work.Exec(ctx, "SELECT * FROM enter_section(1, 'hook', 'p-other', '10 minutes', 1, NULL, 6)")
		return err
	})
	pgtest.Eventually(t, "the entry with fence 6 waits for the write under fence 5", func() bool {
		var n int
		err := w.lock.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%enter_section%' AND datname = current_database()`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, entered); err != nil {
		t.Fatal(err)
	}
	_, err = w.work.Exec(ctx, "SELECT check_fence(1, 5)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "LT409" {
		t.Errorf("fence 5 after fence 6 entered: %v, want LT409", err)
	}
	if _, err := w.work.Exec(ctx, "SELECT check_fence(1, 6)"); err != nil {
		t.Errorf("fence 6: %v", err)
	}
}

// terminate ends the backend that holds agent's lock, from a connection of
// the test's own, as an operator (or a crash) would, and waits until it is
// gone.
func terminate(t *testing.T, w *world, agent int32) {
	t.Helper()
	ctx := context.Background()
	var pid int32
	if err := w.work.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = 1 AND objid = $1::int8::oid AND objsubid = 2`, int64(agent)).Scan(&pid); err != nil {
		t.Fatalf("the holder of AGENT %d: %v", agent, err)
	}
	if _, err := w.work.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "the holder's backend is gone", func() bool {
		var n int
		if err := w.work.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// A holder whose lock is lost under it (its backend terminated from
// outside) while it is between its read and its write: a waiter is granted
// the key and does its own read-modify-write. The stale holder's write
// must be refused by the fence (no lost update), and the checker must tell
// the stale holder, still registered, from a second live holder: a loss,
// not an overlap.
func TestStaleHolderIsFencedNotAnOverlap(t *testing.T) {
	defer workers.MintFences()()
	w := newWorld(t, 1)
	ctx := context.Background()
	b := w.hooks.hold(t, workers.PointApplyChecked, 1)
	stale := goErr(func() error { return w.env.Hook(ctx, workers.RouteNotification, 1) })
	b.wait(t)
	terminate(t, w, 1)
	// The successor runs its whole section while the stale holder waits
	// between its read and its write.
	if err := w.env.Hook(ctx, workers.RoutePreToolUse, 1); err != nil {
		t.Fatalf("the successor: %v", err)
	}
	b.release()
	err := recv(t, stale)
	if !errors.Is(err, workers.ErrFenced) && !errors.Is(err, lockcore.ErrLost) {
		t.Fatalf("stale holder: %v, want its write refused (ErrFenced) or its body stopped (ErrLost)", err)
	}
	if n := w.rec.count(workers.KindHook, model.OutcomeLost); n != 1 {
		t.Errorf("%d lost locks recorded, want 1", n)
	}
	loss := w.rec.loss()
	if loss == nil || !loss.Aborted() || loss.Fence == 0 {
		t.Errorf("the lost section: %+v; want it fenced and aborted", loss)
	}
	if !w.rec.hasNote("whose lock was lost ran on") {
		t.Error("the successor did not note the stale holder it found registered")
	}
	// The stale holder's event stays unapplied; the final reconcile applies
	// it once.
	if n, err := w.env.Drain(ctx); err != nil || n != 1 {
		t.Fatalf("final reconcile applied %d events (%v), want the stale holder's", n, err)
	}
	if err := w.env.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)
	var applied int64
	if err := w.work.QueryRow(ctx, "SELECT value FROM counters WHERE agent_id = 1 AND field = 'applied'").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != 2 {
		t.Errorf("applied = %d, want 2: an update was lost", applied)
	}
}

// A holder killed from outside while it is inside, before its work: the
// successor entering is not an overlap (the holder's backend no longer
// holds the key), and the holder's loss is counted.
func TestOutsideKillIsALossNotAnOverlap(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	b := w.hooks.hold(t, workers.PointEntered, 1)
	victim := goErr(func() error { return w.env.Hook(ctx, workers.RouteNotification, 1) })
	b.wait(t)
	terminate(t, w, 1)
	if err := w.env.Hook(ctx, workers.RoutePreToolUse, 1); err != nil {
		t.Fatalf("the successor: %v", err)
	}
	if n := w.rec.broken(workers.InvNoOverlap); n != 0 {
		t.Errorf("the successor of a lost holder counted as an overlap (%d)", n)
	}
	if !w.rec.hasNote("whose lock was lost ran on") {
		t.Error("the successor did not note the lost holder")
	}
	b.release()
	if err := recv(t, victim); err == nil {
		t.Error("the lost holder's hook succeeded")
	}
	if n := w.rec.count(workers.KindHook, model.OutcomeLost); n != 1 {
		t.Errorf("%d lost locks recorded, want 1", n)
	}
	if _, err := w.env.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.env.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)
}

// A run on a schema that an earlier run without locks damaged inherits
// none of its violations. Without locks, a handoff that read generation 0
// writes 1 after two others took it to 2: the counter goes back, and
// generation 1 and the value 2 are already used. A later, correct run's
// handoff then claims generation 1 again and writes 2 again: neither is a
// violation of the later run.
func TestInheritedDamageIsNotReported(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	w.env.SetLocking(false)
	b := w.hooks.stop(t, workers.PointHandoffChecked, 1)
	slow := goErr(func() error { return w.env.Handoff(ctx, 1) })
	b.wait(t)
	for range 2 {
		if err := w.env.Handoff(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	b.release()
	if err := recv(t, slow); err != nil {
		t.Fatal(err)
	}
	if w.rec.broken(workers.InvHandoffOnce) == 0 || w.rec.broken(workers.InvNoLostUpdate) == 0 {
		t.Fatalf("the damaging run's races were not caught: %v", w.rec.violations)
	}

	later := &rec{}
	env := workers.NewEnv(w.env.DB, w.locks, later, "later-"+w.schema)
	if err := env.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if err := env.Handoff(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := env.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	later.clean(t)
}

// The lost section's details, as recorded with its lost attempt.
func (r *rec) loss() *workers.Loss {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.attempts {
		if a.Loss != nil {
			return a.Loss
		}
	}
	return nil
}
