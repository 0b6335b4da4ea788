package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// The conformance suite: every case runs on both stores, as subtests of
// TestPostgres and TestSQLite, each on tables of its own.
var suite = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	{"CompatibilityMatrix", testCompatibilityMatrix},
	{"UpgradeWaitsForReaders", testUpgradeWaitsForReaders},
	{"UpgradeRefused", testUpgradeRefused},
	{"UpgradeTimesOut", testUpgradeTimesOut},
	{"WriterNotStarved", testWriterNotStarved},
	{"WaiterWokenOnRelease", testWaiterWokenOnRelease},
	{"LeaseRunsOutAndIsTakenOver", testLeaseRunsOut},
	{"TakeoverAtFirstTryLeavesNoWaiter", testTakeoverFirstTry},
	{"RecoveryRefusedWhileLeaseLive", testRecoveryRefusedLeaseLive},
	{"RecoveryRefusedWhileHeartbeatFresh", testRecoveryRefusedHeartbeatFresh},
	{"RecoveryRefusedWhileJobActive", testRecoveryRefusedJobActive},
	{"RecoveryAuditedInSameTransaction", testRecoveryAuditAtomic},
	{"HeartbeatRenews", testHeartbeatRenews},
	{"LostWhenRowTaken", testLostWhenRowTaken},
	{"OrderRefused", testOrderRefused},
	{"AcquireAllSortsAndIsAllOrNone", testAcquireAll},
	{"TryAndTimeout", testTryAndTimeout},
	{"ListingAndMetadata", testListing},
	{"CloseReleases", testCloseReleases},
	{"JobCapsNeverExceeded", testJobCaps},
	{"JobFairness", testJobFairness},
	{"JobOwnsItsLocks", testJobOwnsLocks},
	{"AtomicWriteInterrupted", testAtomicWriteInterrupted},
	{"AtomicWriteFenced", testAtomicWriteFenced},
	{"AtomicWriteStalledKeepsNewerVersion", testAtomicWriteStalled},
	{"TwoProcesses", testTwoProcesses},
	{"JobIDReusedAfterKill", testJobIDReused},
	{"HolderKilledWhileHolding", testHolderKilled},
}

func TestPostgres(t *testing.T) { runSuite(t, postgresEnv) }
func TestSQLite(t *testing.T)   { runSuite(t, sqliteEnv) }

// runSuite runs the suite's cases in parallel, beside the package's other
// parallel tests (TestCrash's server start, the tests that wait for a lease
// or a backoff), rather than holding them back until the suite ends.
// TestSQLiteBusyIsASentinel, which changes sqliteBusy, stays sequential:
// it ends before any parallel test starts.
func runSuite(t *testing.T, newEnv func(*testing.T) *env) {
	t.Parallel()
	for _, c := range suite {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newEnv(t))
		})
	}
}

// acquire takes r or fails the test.
func acquire(t *testing.T, ctx context.Context, m *Manager, r Resource, mode Mode) *Lock {
	t.Helper()
	l, err := m.Acquire(ctx, r, mode)
	if err != nil {
		t.Fatalf("Acquire %s %s: %v", r, mode, err)
	}
	return l
}

// release frees l or fails the test.
func release(t *testing.T, l *Lock) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release %s: %v", l.Resource(), err)
	}
}

// tryFails reports whether a try of r in mode is refused with ErrLocked; a
// grant is released at once.
func tryFails(t *testing.T, m *Manager, r Resource, mode Mode) bool {
	t.Helper()
	l, err := m.TryAcquire(ctxT(t), r, mode)
	switch {
	case err == nil:
		release(t, l)
		return false
	case errors.Is(err, ErrLocked):
		return true
	default:
		t.Fatalf("TryAcquire %s %s: %v", r, mode, err)
		return false
	}
}

// waiting reports whether Locks lists a waiter for r in mode.
func waiting(t *testing.T, m *Manager, r Resource, mode Mode) bool {
	t.Helper()
	infos, err := m.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(infos, func(i Info) bool { return !i.Granted && i.Resource == r && i.Mode == mode })
}

// holding returns the listed holders of r.
func holding(t *testing.T, m *Manager, r Resource) []Info {
	t.Helper()
	infos, err := m.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []Info
	for _, i := range infos {
		if i.Granted && i.Resource == r {
			out = append(out, i)
		}
	}
	return out
}

// aged waits until every holder of r is past its lease (lapsed) and, if
// beat > 0, its heartbeat is older than beat, by the database's clock.
func aged(t *testing.T, m *Manager, r Resource, lapsed bool, beat time.Duration) {
	t.Helper()
	pgtest.Eventually(t, fmt.Sprintf("the holders of %s age (lapsed %v, heartbeat older than %s)", r, lapsed, beat), func() bool {
		locks, err := m.Locks(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range locks {
			if i.Granted && i.Resource == r {
				if lapsed && i.LeaseLeft >= 0 || i.HeartbeatAge <= beat {
					return false
				}
			}
		}
		return true
	})
}

func testCompatibilityMatrix(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	// Written out, not derived from compatible(), so that a wrong matrix fails.
	want := map[[2]Mode]bool{ // {held, wanted}: granted?
		{Read, Read}: true, {Read, Write}: false, {Read, Upgradeable}: true,
		{Write, Read}: false, {Write, Write}: false, {Write, Upgradeable}: false,
		{Upgradeable, Read}: true, {Upgradeable, Write}: false, {Upgradeable, Upgradeable}: false,
	}
	for pair, granted := range want {
		r := Map(fmt.Sprintf("m-%s-%s", pair[0], pair[1]))
		l := acquire(t, ctxT(t), a, r, pair[0])
		if refused := tryFails(t, b, r, pair[1]); refused == granted {
			t.Errorf("%s held, %s wanted: granted %v, want %v", pair[0], pair[1], !refused, granted)
		}
		release(t, l)
		// Free again: anything goes.
		if tryFails(t, b, r, pair[1]) {
			t.Errorf("%s refused after the %s holder left", pair[1], pair[0])
		}
	}
	// Many readers at once, with the one upgradeable holder.
	r := Sketch("shared")
	var locks []*Lock
	for range 3 {
		locks = append(locks, acquire(t, ctxT(t), b, r, Read))
	}
	locks = append(locks, acquire(t, ctxT(t), a, r, Upgradeable))
	if got := len(holding(t, a, r)); got != 4 {
		t.Errorf("%d holders listed, want 4", got)
	}
	fences := map[int64]bool{}
	for _, l := range locks {
		if fences[l.Fence()] {
			t.Errorf("fence %d given twice", l.Fence())
		}
		fences[l.Fence()] = true
		release(t, l)
	}
}

func testUpgradeWaitsForReaders(t *testing.T, e *env) {
	a, b, c := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"}), e.open(Options{Owner: "C"})
	r := Map("up")
	u := acquire(t, ctxT(t), a, r, Upgradeable)
	rd := acquire(t, ctxT(t), b, r, Read)
	before := u.Fence()
	done := make(chan error, 1)
	go func() { done <- u.Upgrade(ctxT(t)) }()
	pgtest.Eventually(t, "the upgrade waits", func() bool { return waiting(t, c, r, Write) })
	select {
	case err := <-done:
		t.Fatalf("Upgrade returned %v while a reader held the resource", err)
	default:
	}
	// While the upgrade waits, new readers are held back.
	if !tryFails(t, c, r, Read) {
		t.Error("a new reader got in while an upgrade waited")
	}
	if u.Mode() != Upgradeable {
		t.Errorf("mode %s while waiting", u.Mode())
	}
	release(t, rd)
	if err := <-done; err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	if u.Mode() != Write || u.Fence() <= before {
		t.Errorf("after upgrade: mode %s fence %d (was %d)", u.Mode(), u.Fence(), before)
	}
	if hs := holding(t, c, r); len(hs) != 1 || hs[0].Mode != Write || hs[0].Fence != u.Fence() {
		t.Errorf("holders after upgrade: %+v", hs)
	}
	if !tryFails(t, c, r, Read) {
		t.Error("a reader got in after the upgrade")
	}
	if waiting(t, c, r, Write) {
		t.Error("the upgrade's waiter row is still listed")
	}
	release(t, u)
}

func testUpgradeRefused(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A"})
	for _, mode := range []Mode{Read, Write} {
		l := acquire(t, ctxT(t), a, Project("p-"+mode.String()), mode)
		if err := l.Upgrade(ctxT(t)); !errors.Is(err, ErrNotUpgradeable) {
			t.Errorf("Upgrade of a %s lock: %v, want ErrNotUpgradeable", mode, err)
		}
		release(t, l)
	}
	// Two readers can never both wait to upgrade: the second would-be
	// upgrader cannot even take the upgradeable mode.
	r := Project("two")
	u := acquire(t, ctxT(t), a, r, Upgradeable)
	if !tryFails(t, e.open(Options{Owner: "B"}), r, Upgradeable) {
		t.Error("a second upgradeable holder was let in")
	}
	release(t, u)
	if err := u.Upgrade(ctxT(t)); err == nil {
		t.Error("Upgrade after Release succeeded")
	}
}

func testUpgradeTimesOut(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A", Wait: time.Second}), e.open(Options{Owner: "B"})
	r := Map("slow")
	u := acquire(t, ctxT(t), a, r, Upgradeable)
	rd := acquire(t, ctxT(t), b, r, Read)
	if err := u.Upgrade(ctxT(t)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Upgrade with a reader staying: %v, want ErrTimeout", err)
	}
	if u.Mode() != Upgradeable || u.Err() != nil {
		t.Errorf("after a timed-out upgrade: mode %s err %v", u.Mode(), u.Err())
	}
	// Its waiter row is gone: readers come in again.
	if tryFails(t, b, r, Read) {
		t.Error("readers still held back after the upgrade gave up")
	}
	release(t, rd)
	release(t, u)
}

func testWriterNotStarved(t *testing.T, e *env) {
	a, b, w := e.open(Options{Owner: "readers"}), e.open(Options{Owner: "probe"}), e.open(Options{Owner: "writer"})
	r := Map("busy")
	first := acquire(t, ctxT(t), a, r, Read)
	got := make(chan error, 1)
	var wl *Lock
	go func() {
		var err error
		wl, err = w.Acquire(ctxT(t), r, Write)
		got <- err
	}()
	pgtest.Eventually(t, "the writer waits", func() bool { return waiting(t, b, r, Write) })
	// A reader arriving now would overlap the first one; it waits instead.
	if !tryFails(t, b, r, Read) {
		t.Fatal("a new reader got in ahead of a waiting writer")
	}
	// A stream of readers that would always overlap, keeping the resource
	// read-locked forever without writer precedence.
	ctx, stop := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := a.Acquire(ctx, r, Read)
				if err != nil {
					continue
				}
				time.Sleep(20 * time.Millisecond) // the reader's work
				_ = l.Release(context.Background())
			}
		}()
	}
	release(t, first)
	err := <-got
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	release(t, wl)
}

func testWaiterWokenOnRelease(t *testing.T, e *env) {
	// A waiter is woken by the release, not by its backoff: with a backoff
	// cap of 1s (Lease 10s), eight hand-overs in a row would take seconds.
	// The last waiter's Wait covers all eight hand-overs, each two commits
	// queued behind the others' retries: a loaded CI box has taken over
	// 10s for them (SQLite under -race), so the bound is the step's 30s
	// (ctxT), which a healthy run never comes near.
	o := Options{Lease: 10 * time.Second, Heartbeat: time.Second, Wait: 30 * time.Second}
	m := e.open(o)
	r := Sketch("relay")
	var order []int
	var mu sync.Mutex
	first := acquire(t, ctxT(t), m, r, Write)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := acquire(t, ctxT(t), m, r, Write)
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			release(t, l)
		}()
	}
	pgtest.Eventually(t, "eight waiters", func() bool {
		infos, _ := m.Locks(ctxT(t))
		return len(infos) == 9
	})
	start := time.Now()
	release(t, first)
	wg.Wait()
	if len(order) != 8 {
		t.Fatalf("%d of 8 waiters got the lock", len(order))
	}
	t.Logf("eight hand-overs in %s", time.Since(start))
}

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

func testOrderRefused(t *testing.T, e *env) {
	m := e.open(Options{})
	mb := acquire(t, ctxT(t), m, Map("b"), Read)
	ctx := mb.Context()
	for _, r := range []Resource{Project("z"), Map("a"), Map("b")} {
		if l, err := m.Acquire(ctx, r, Read); !errors.Is(err, ErrLockOrder) {
			t.Errorf("Acquire %s after map:b: %v, want ErrLockOrder", r, err)
			if l != nil {
				release(t, l)
			}
		}
		if _, err := m.TryAcquire(ctx, r, Read); !errors.Is(err, ErrLockOrder) {
			t.Errorf("TryAcquire %s after map:b: %v, want ErrLockOrder", r, err)
		}
	}
	mc := acquire(t, ctx, m, Map("c"), Write)
	sk := acquire(t, mc.Context(), m, Sketch("a"), Write)
	if f, ok := FenceOf(sk.Context(), Map("b")); !ok || f != mb.Fence() {
		t.Errorf("FenceOf(map:b) = %d, %v", f, ok)
	}
	release(t, sk)
	release(t, mc)
	release(t, mb)
	// Released locks no longer count: the same context (its values; its
	// cancellation ended with the release) may go back.
	l := acquire(t, context.WithoutCancel(ctx), m, Project("z"), Read)
	release(t, l)
	// Unrelated contexts are not ordered against each other.
	l1 := acquire(t, ctxT(t), m, Sketch("s"), Read)
	l2 := acquire(t, ctxT(t), m, Project("p"), Read)
	release(t, l1)
	release(t, l2)
}

func testAcquireAll(t *testing.T, e *env) {
	m := e.open(Options{})
	locks, err := m.AcquireAll(ctxT(t),
		Request{Sketch("s2"), Write}, Request{Map("m1"), Read}, Request{Sketch("s1"), Write}, Request{Project("p"), Read})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range locks {
		got = append(got, l.Resource().String())
	}
	if want := []string{"project:p", "map:m1", "sketch:s1", "sketch:s2"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	last := locks[len(locks)-1].Context()
	for _, l := range locks {
		if _, ok := FenceOf(last, l.Resource()); !ok && l != locks[len(locks)-1] {
			t.Errorf("the last context does not carry %s", l.Resource())
		}
	}
	if _, err := m.Acquire(last, Map("m0"), Read); !errors.Is(err, ErrLockOrder) {
		t.Errorf("out of order after AcquireAll: %v", err)
	}
	for _, l := range slices.Backward(locks) {
		release(t, l)
	}
	// All or none: the last one is held elsewhere.
	other := e.open(Options{Owner: "other"})
	block := acquire(t, ctxT(t), other, Sketch("s9"), Write)
	short := e.open(Options{Wait: 500 * time.Millisecond})
	if _, err := short.AcquireAll(ctxT(t), Request{Project("p"), Write}, Request{Sketch("s9"), Write}); !errors.Is(err, ErrTimeout) {
		t.Errorf("AcquireAll with one held: %v, want ErrTimeout", err)
	}
	if hs := holding(t, m, Project("p")); len(hs) != 0 {
		t.Errorf("AcquireAll left %+v held", hs)
	}
	release(t, block)
	if _, err := m.AcquireAll(ctxT(t), Request{Map("x"), Read}, Request{Map("x"), Write}); !errors.Is(err, ErrLockOrder) {
		t.Errorf("the same resource twice: %v", err)
	}
}

func testTryAndTimeout(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B", Wait: 200 * time.Millisecond})
	r := Project("held")
	l := acquire(t, ctxT(t), a, r, Write)
	if got, err := b.TryAcquire(ctxT(t), r, Read); got != nil || !errors.Is(err, ErrLocked) {
		t.Errorf("TryAcquire: %v, %v", got, err)
	}
	start := time.Now()
	if _, err := b.Acquire(ctxT(t), r, Read); !errors.Is(err, ErrTimeout) {
		t.Errorf("Acquire: %v, want ErrTimeout", err)
	}
	if w := time.Since(start); w < 200*time.Millisecond {
		t.Errorf("gave up after %s", w)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() {
		pgtest.Eventually(t, "a waiter", func() bool { return waiting(t, a, r, Read) })
		cancel()
	}()
	if _, err := e.open(Options{Owner: "C"}).Acquire(ctx, r, Read); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire cancelled: %v", err)
	}
	pgtest.Eventually(t, "the cancelled waiter's row removed", func() bool { return !waiting(t, a, r, Read) })
	release(t, l)
	if err := l.Release(ctxT(t)); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if !errors.Is(l.Err(), ErrReleased) || !errors.Is(context.Cause(l.Context()), ErrReleased) {
		t.Errorf("after Release: Err %v, cause %v", l.Err(), context.Cause(l.Context()))
	}
	if _, err := a.Acquire(ctxT(t), Resource{LevelMap, "a:b"}, Read); err == nil {
		t.Error("a resource id with ':' was accepted")
	}
}

func testListing(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	r := Map("listed")
	l := acquire(t, ctxT(t), a, r, Write)
	if err := l.SetMetadata(ctxT(t), map[string]any{"op": "calibrate", "n": 3}); err != nil {
		t.Fatal(err)
	}
	go func() {
		if w, err := b.Acquire(ctxT(t), r, Read); err == nil {
			_ = w.Release(context.Background())
		}
	}()
	pgtest.Eventually(t, "a waiter", func() bool { return waiting(t, a, r, Read) })
	go func() {
		if w, err := b.Acquire(ctxT(t), r, Write); err == nil {
			_ = w.Release(context.Background())
		}
	}()
	pgtest.Eventually(t, "a second waiter", func() bool { return waiting(t, a, r, Write) })
	locks, err := a.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 3 {
		t.Fatalf("listed %+v", locks)
	}
	h, w, w2 := locks[0], locks[1], locks[2]
	now := h.LeaseExpires.Add(-h.LeaseLeft) // the database's clock at the listing
	if !h.Granted || h.Owner != "A" || h.Mode != Write || h.Fence != l.Fence() || h.Metadata["op"] != "calibrate" ||
		h.Stale || h.Since.After(now) || h.Position != 0 || h.LeaseLeft <= 0 ||
		!h.Heartbeat.Add(h.HeartbeatAge).Equal(now) || h.HeartbeatAge < 0 {
		t.Errorf("holder %+v (now %s)", h, now)
	}
	if w.Granted || w.Owner != "B" || w.Mode != Read || w.Since.IsZero() || w.Position != 1 || w.LeaseLeft <= 0 ||
		!w.LeaseExpires.Add(-w.LeaseLeft).Equal(now) {
		t.Errorf("waiter %+v", w)
	}
	if w2.Granted || w2.Mode != Write || w2.Position != 2 || w2.Since.Before(w.Since) {
		t.Errorf("second waiter %+v", w2)
	}
	release(t, l)
}

func testCloseReleases(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	l := acquire(t, ctxT(t), a, Map("closing"), Write)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), ErrReleased) {
		t.Errorf("after Close: %v", l.Err())
	}
	if tryFails(t, b, Map("closing"), Write) {
		t.Error("Close left the lock held")
	}
	if _, err := a.Acquire(ctxT(t), Map("x"), Read); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
}

func testJobCaps(t *testing.T, e *env) {
	const global, perProject, maps = 3, 2, 1
	// A long lease: the caps are under test, not expiry. At load 17 the
	// SQLite writers queued the heartbeats past the default 5s.
	o := Options{MaxGlobalJobs: global, MaxJobsPerProject: perProject, MaxMapJobsPerProject: maps, Lease: 30 * time.Second}
	ms := []*Manager{e.open(o), e.open(o), e.open(o)} // three processes
	var mu sync.Mutex
	running, inProject, mapsIn := 0, map[string]int{}, map[string]int{}
	var over atomic.Int32
	var wg sync.WaitGroup
	for i := range 18 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := Job{ID: fmt.Sprintf("job%d", i), Project: fmt.Sprintf("p%d", i%3)}
			if i%2 == 0 {
				j.Map = fmt.Sprintf("m%d", i)
			}
			s, err := ms[i%3].StartJob(ctxT(t), j)
			if err != nil {
				t.Errorf("StartJob: %v", err)
				return
			}
			mu.Lock()
			running++
			inProject[j.Project]++
			if j.Map != "" {
				mapsIn[j.Project]++
			}
			if running > global || inProject[j.Project] > perProject || mapsIn[j.Project] > maps {
				over.Add(1)
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // the job's work
			mu.Lock()
			running--
			inProject[j.Project]--
			if j.Map != "" {
				mapsIn[j.Project]--
			}
			mu.Unlock()
			if err := s.Finish(ctxT(t)); err != nil {
				t.Errorf("Done: %v", err)
			}
		}()
	}
	// Meanwhile, the database's own view never exceeds the caps either.
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			jobs, err := ms[0].Jobs(ctxT(t))
			if err != nil {
				t.Error(err)
				return
			}
			n, per := 0, map[string]int{}
			for _, j := range jobs {
				if j.Running {
					n++
					per[j.Project]++
				}
			}
			for _, c := range per {
				if c > perProject {
					over.Add(1)
				}
			}
			if n > global {
				over.Add(1)
			}
		}
	}()
	wg.Wait()
	close(stop)
	watch.Wait()
	if n := over.Load(); n > 0 {
		t.Errorf("caps exceeded %d times", n)
	}
	if jobs, _ := ms[0].Jobs(ctxT(t)); len(jobs) != 0 {
		t.Errorf("jobs left: %+v", jobs)
	}
}

func testJobFairness(t *testing.T, e *env) {
	// Eleven queued jobs share one SQLite writer with their scheduling
	// passes; on a loaded box the heartbeat has waited out a 5s lease
	// behind them, losing every queued job. Leases are not what this case
	// tests: a long one keeps them out of the way.
	o := Options{MaxGlobalJobs: 1, Lease: 30 * time.Second}
	m := e.open(o)
	other := e.open(o) // the small project's process
	first, err := m.StartJob(ctxT(t), Job{ID: "big-0", Project: "big"})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 20)
	var wg sync.WaitGroup
	queue := func(mgr *Manager, id, project string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := mgr.StartJob(ctxT(t), Job{ID: id, Project: project})
			if err != nil {
				t.Errorf("StartJob %s: %v", id, err)
				return
			}
			started <- id
			_ = s.Finish(ctxT(t))
		}()
	}
	queued := func(n int) func() bool {
		return func() bool {
			jobs, err := m.Jobs(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			q := 0
			for _, j := range jobs {
				if !j.Running {
					q++
				}
			}
			return q == n
		}
	}
	for i := 1; i <= 10; i++ {
		queue(m, fmt.Sprintf("big-%d", i), "big")
	}
	pgtest.Eventually(t, "ten big jobs queued", queued(10))
	queue(other, "small-1", "small")
	pgtest.Eventually(t, "the small job queued", queued(11))
	if err := first.Finish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Every StartJob may fail (and say so): then none starts, and the test
	// must end rather than wait for good.
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	var got string
	select {
	case got = <-started:
	case <-ended:
		select {
		case got = <-started: // it started, then all ended
		default:
			t.Fatal("no queued job started")
		}
	}
	if got != "small-1" {
		t.Errorf("after the running big job, %s started; want the small project's job first", got)
	}
	<-ended
}

func testJobOwnsLocks(t *testing.T, e *env) {
	m := e.open(Options{})
	s, err := m.StartJob(ctxT(t), Job{ID: "j1", Project: "p", Kind: "import"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.StartJob(ctxT(t), Job{ID: "j1", Project: "p"}); !errors.Is(err, ErrJobExists) {
		t.Errorf("a second live job j1: %v", err)
	}
	p := acquire(t, s.Context(), m, Project("p"), Read)
	mp := acquire(t, p.Context(), m, Map("m"), Write)
	infos, _ := m.Locks(ctxT(t))
	for _, i := range infos {
		if i.Owner != "job:j1" {
			t.Errorf("listed owner %q, want the job", i.Owner)
		}
	}
	jobs, _ := m.Jobs(ctxT(t))
	if len(jobs) != 1 || !jobs[0].Running || jobs[0].Kind != "import" || jobs[0].Owner != "job:j1" {
		t.Errorf("jobs: %+v", jobs)
	}
	if err := s.Finish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if p.Err() == nil || mp.Err() == nil {
		t.Error("Done left the job's locks held")
	}
	if infos, _ := m.Locks(ctxT(t)); len(infos) != 0 {
		t.Errorf("left after Finish: %+v", infos)
	}
	if !errors.Is(context.Cause(s.Context()), ErrReleased) {
		t.Errorf("job context after Finish: %v", context.Cause(s.Context()))
	}
}
