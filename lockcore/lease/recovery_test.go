package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Leases, heartbeats, loss and audited stale recovery (the suite).

func testLeaseRunsOut(t *testing.T, e *env) {
	// A holder without heartbeats and a sub-second lease; another owner
	// whose grace is short.
	a := e.open(Options{Owner: "A", Lease: 300 * time.Millisecond, Heartbeat: -1})
	b := e.open(Options{Owner: "B", Grace: 100 * time.Millisecond})
	r := Map("lapse")
	old := acquire(t, ctxT(t), a, r, Write)
	held := holding(t, b, r)[0]
	l := acquire(t, ctxT(t), b, r, Write) // waits until A's lease is stale, then takes over
	if l.Fence() <= old.Fence() {
		t.Errorf("fence %d after a takeover of fence %d", l.Fence(), old.Fence())
	}
	select {
	case <-old.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the old holder was never told")
	}
	if err := context.Cause(old.Context()); !errors.Is(err, ErrLost) || !errors.Is(err, lockcore.ErrLost) {
		t.Errorf("old holder's context cause: %v, want ErrLost (and lockcore's)", err)
	}
	if !errors.Is(old.Err(), ErrLost) {
		t.Errorf("old holder's Err: %v", old.Err())
	}
	if err := old.Release(ctxT(t)); !errors.Is(err, ErrLost) {
		t.Errorf("Release of the taken-over lock: %v, want ErrLost", err)
	}
	// ...and it touched nothing: B still holds.
	if hs := holding(t, b, r); len(hs) != 1 || hs[0].Owner != "B" || hs[0].Fence != l.Fence() {
		t.Errorf("holders after the old holder's Release: %+v", hs)
	}
	recs, err := b.Audit(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("audit: %+v, want one record", recs)
	}
	rec := recs[0]
	if rec.Resource != r || rec.Actor != "B" || rec.Reason != "lease expired" || rec.VictimOwner != "A" ||
		rec.VictimFence != old.Fence() || rec.VictimMode != Write || rec.Fence != l.Fence() {
		t.Errorf("audit record: %+v", rec)
	}
	// By the database's clock: the lease had passed, the heartbeat was older than B's grace.
	if !rec.At.After(held.LeaseExpires) || rec.At.Sub(held.Heartbeat) <= 100*time.Millisecond {
		t.Errorf("taken over at %s; the lease passed at %s, the last heartbeat was at %s, B's grace is 100ms",
			rec.At, held.LeaseExpires, held.Heartbeat)
	}
	release(t, l)
}

// An Acquire whose very first attempt takes over a stale holder leaves no
// waiter row behind (a writer's would hold readers back until it expired).
func testTakeoverFirstTry(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A", Lease: 100 * time.Millisecond, Heartbeat: -1})
	b := e.open(Options{Owner: "B", Grace: 10 * time.Millisecond})
	r := Map("first")
	old := acquire(t, ctxT(t), a, r, Write)
	aged(t, b, r, true, 20*time.Millisecond)
	l := acquire(t, ctxT(t), b, r, Write)
	if l.Fence() <= old.Fence() {
		t.Errorf("fence %d after %d", l.Fence(), old.Fence())
	}
	release(t, l)
	if waiting(t, b, r, Write) {
		t.Error("the takeover left its waiter row")
	}
	if tryFails(t, b, r, Read) {
		t.Error("a reader is held back after the writer left")
	}
}

func testRecoveryRefusedLeaseLive(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A", Lease: time.Minute, Heartbeat: -1})
	b := e.open(Options{Owner: "B", Grace: 10 * time.Millisecond})
	r := Project("live")
	l := acquire(t, ctxT(t), a, r, Write)
	aged(t, b, r, false, 50*time.Millisecond) // the heartbeat is old, the lease is not
	if ok, err := b.RecoverStale(ctxT(t), r, "admin", "test"); ok || err != nil {
		t.Errorf("RecoverStale with a live lease: %v, %v", ok, err)
	}
	if !tryFails(t, b, r, Write) {
		t.Error("took over a live lease")
	}
	if recs, _ := b.Audit(ctxT(t)); len(recs) != 0 {
		t.Errorf("audit records without a recovery: %+v", recs)
	}
	release(t, l)
}

func testRecoveryRefusedHeartbeatFresh(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A", Lease: 100 * time.Millisecond, Heartbeat: -1})
	b := e.open(Options{Owner: "B", Grace: time.Hour})
	c := e.open(Options{Owner: "C", Grace: 50 * time.Millisecond})
	r := Project("fresh")
	l := acquire(t, ctxT(t), a, r, Write)
	aged(t, b, r, true, 0) // the lease has passed; to B, the heartbeat is not old
	if ok, err := b.RecoverStale(ctxT(t), r, "admin", "test"); ok || err != nil {
		t.Errorf("RecoverStale within the grace: %v, %v", ok, err)
	}
	if !tryFails(t, b, r, Write) {
		t.Error("took over within the grace")
	}
	// C's grace is short: to C it is stale. Its recovery is audited.
	aged(t, c, r, true, 50*time.Millisecond)
	if ok, err := c.RecoverStale(ctxT(t), r, "admin", "stuck import"); !ok || err != nil {
		t.Fatalf("RecoverStale of a stale holder: %v, %v", ok, err)
	}
	if hs := holding(t, c, r); len(hs) != 0 {
		t.Errorf("holders after recovery: %+v", hs)
	}
	recs, _ := c.Audit(ctxT(t))
	if len(recs) != 1 || recs[0].Actor != "admin" || recs[0].Reason != "stuck import" || recs[0].VictimOwner != "A" ||
		recs[0].VictimFence != l.Fence() || recs[0].Fence != 0 {
		t.Errorf("audit: %+v", recs)
	}
	if err := l.Release(ctxT(t)); !errors.Is(err, ErrLost) {
		t.Errorf("Release after recovery: %v, want ErrLost", err)
	}
}

func testRecoveryRefusedJobActive(t *testing.T, e *env) {
	jobs := e.open(Options{Owner: "J", Lease: 2 * time.Second, Heartbeat: 100 * time.Millisecond})
	locks := e.open(Options{Owner: "N", Lease: 100 * time.Millisecond, Heartbeat: -1})
	b := e.open(Options{Owner: "B", Grace: 50 * time.Millisecond})
	slot, err := jobs.StartJob(ctxT(t), Job{ID: "tiles-1", Project: "p", Map: "m", Kind: "tiles"})
	if err != nil {
		t.Fatal(err)
	}
	r := Map("m")
	l := acquire(t, slot.Context(), locks, r, Write)
	if l.Owner() != "job:tiles-1" {
		t.Errorf("owner %q", l.Owner())
	}
	aged(t, b, r, true, 100*time.Millisecond) // lapsed, heartbeat old: only the job holds it
	if hs := holding(t, b, r); len(hs) != 1 || hs[0].Owner != "job:tiles-1" || hs[0].Stale {
		t.Errorf("listed: %+v", hs)
	}
	if ok, err := b.RecoverStale(ctxT(t), r, "admin", "test"); ok || err != nil {
		t.Errorf("RecoverStale while the job is active: %v, %v", ok, err)
	}
	if !tryFails(t, b, r, Read) {
		t.Error("took over a lock of an active job")
	}
	// The job's process freezes: its lease passes, nothing claims the lock.
	jobs.paused.Store(true)
	pgtest.Eventually(t, "recovery once the job is gone", func() bool {
		ok, err := b.RecoverStale(ctxT(t), r, "admin", "job died")
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	recs, _ := b.Audit(ctxT(t))
	if len(recs) != 1 || recs[0].VictimOwner != "job:tiles-1" {
		t.Errorf("audit: %+v", recs)
	}
	select {
	case <-slot.Context().Done():
		if !errors.Is(context.Cause(slot.Context()), ErrLost) {
			t.Errorf("job context cause: %v", context.Cause(slot.Context()))
		}
	case <-time.After(10 * time.Second):
		t.Error("the frozen job was never told it lost its slot")
	}
	_ = slot.Finish(ctxT(t))
}

func testRecoveryAuditAtomic(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A", Lease: 100 * time.Millisecond, Heartbeat: -1})
	b := e.open(Options{Owner: "B", Grace: 10 * time.Millisecond})
	r := Sketch("audited")
	old := acquire(t, ctxT(t), a, r, Write)
	aged(t, b, r, true, 20*time.Millisecond)
	// The audit table refuses writes: the takeover must not happen.
	switch e.store {
	case "postgres":
		e.exec(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$`)
		e.exec(`CREATE TRIGGER refuse BEFORE INSERT ON dal_audit FOR EACH ROW EXECUTE FUNCTION refuse()`)
	default:
		e.exec(`CREATE TRIGGER refuse BEFORE INSERT ON dal_audit BEGIN SELECT RAISE(ABORT, 'audit refused'); END`)
	}
	if l, err := b.TryAcquire(ctxT(t), r, Write); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("takeover with the audit refused: %v, %v", l, err)
	}
	if ok, err := b.RecoverStale(ctxT(t), r, "admin", "test"); ok || err == nil {
		t.Fatalf("RecoverStale with the audit refused: %v, %v", ok, err)
	}
	if hs := holding(t, b, r); len(hs) != 1 || hs[0].Fence != old.Fence() {
		t.Fatalf("the stale holder should still be there: %+v", hs)
	}
	e.exec(`DROP TRIGGER refuse` + map[bool]string{true: " ON dal_audit"}[e.store == "postgres"])
	l, err := b.TryAcquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if recs, _ := b.Audit(ctxT(t)); len(recs) != 1 || recs[0].VictimFence != old.Fence() {
		t.Errorf("audit: %+v", recs)
	}
	release(t, l)
}

func testHeartbeatRenews(t *testing.T, e *env) {
	m := e.open(Options{Heartbeat: 100 * time.Millisecond})
	r := Map("beat")
	l := acquire(t, ctxT(t), m, r, Read)
	first := holding(t, m, r)[0]
	pgtest.Eventually(t, "a heartbeat renews the lease", func() bool {
		h := holding(t, m, r)[0]
		return h.Heartbeat.After(first.Heartbeat) && h.LeaseExpires.After(first.LeaseExpires)
	})
	if l.Err() != nil {
		t.Errorf("lost while heartbeating: %v", l.Err())
	}
	release(t, l)
}

func testLostWhenRowTaken(t *testing.T, e *env) {
	m := e.open(Options{Lease: 2 * time.Second, Heartbeat: 50 * time.Millisecond})
	r := Map("gone")
	l := acquire(t, ctxT(t), m, r, Write)
	e.exec(`DELETE FROM dal_locks`) // an operator, or a bug, removes the row
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never noticed its row was gone")
	}
	if !errors.Is(context.Cause(l.Context()), ErrLost) {
		t.Errorf("cause %v", context.Cause(l.Context()))
	}
	if err := l.Release(ctxT(t)); !errors.Is(err, ErrLost) {
		t.Errorf("Release: %v, want ErrLost", err)
	}
}
