package workers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// Kill-holder: the section terminates the backend that holds its lock, on
// entry, and carries on. The lock frees (a waiter gets it), the worker
// sees its loss (ErrLost, or its write refused by the fence: ErrFenced),
// nothing leaks, and no update is lost.
func TestKillHolder(t *testing.T) {
	defer workers.MintFences()()
	w := newWorld(t, 2)
	ctx := context.Background()
	w.env.Faults.Add(workers.FaultKillHolder, 1)
	b := w.hooks.stop(t, workers.PointEntered, 1)
	victim := goErr(func() error { return w.env.Hook(ctx, workers.RouteNotification, 1) })
	b.wait(t)
	waiter := goErr(func() error { return w.env.Hook(ctx, workers.RoutePreToolUse, 1) })
	w.waitQueued(t, 1, 1)
	b.release()
	if err := recv(t, victim); !errors.Is(err, lockcore.ErrLost) && !errors.Is(err, workers.ErrFenced) {
		t.Fatalf("victim: %v, want ErrLost or ErrFenced", err)
	}
	if err := recv(t, waiter); err != nil {
		t.Fatalf("waiter after the kill: %v", err)
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
	if l := w.rec.loss(); l == nil || !l.Aborted() {
		t.Errorf("the killed holder's section: %+v, want it aborted", l)
	}
	if h := w.locks.Held(); h != 0 {
		t.Errorf("lockcore holds %d locks", h)
	}
	if n := w.lock.Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d lock connections checked out", n)
	}
	ok, err := w.locks.TryWith(ctx, lockcore.Pair(registry.SpaceAgent, 1), func(context.Context) error { return nil })
	if !ok || err != nil {
		t.Errorf("AGENT 1 not free after the kill: %v, %v", ok, err)
	}
}

// Reentrant: a section that takes its own key again is refused at once.
func TestReentrantRefused(t *testing.T) {
	w := newWorld(t, 1)
	w.env.Faults.Add(workers.FaultReentrant, 1)
	if err := w.env.Hook(context.Background(), workers.RouteNotification, 1); err != nil {
		t.Fatal(err)
	}
	if n := w.rec.count(workers.KindHook, model.OutcomeReentrant); n != 1 {
		t.Errorf("%d reentrant refusals recorded, want 1", n)
	}
	w.rec.clean(t)
}

// A body that outlasts the lock timeout: the waiter times out, its event
// stays unapplied, and the final reconcile applies it exactly once. The
// holder stays inside until the waiter has timed out, whatever the timing.
func TestTimeoutThenReconcile(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	b := w.hooks.stop(t, workers.PointEntered, 1)
	holder := goErr(func() error { return w.env.Hook(ctx, workers.RouteNotification, 1) })
	b.wait(t)
	w.env.SetLockTimeout(200 * time.Millisecond) // the waiter's; the holder's acquire had the default
	if err := w.env.Hook(ctx, workers.RoutePreToolUse, 1); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("waiter behind a held section: %v, want ErrTimeout", err)
	}
	b.release()
	if err := recv(t, holder); err != nil {
		t.Fatal(err)
	}
	n, err := w.env.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("final reconcile applied %d events, want the timed-out one", n)
	}
	if err := w.env.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)
	if n := w.rec.count(workers.KindHook, model.OutcomeTimeout); n != 1 {
		t.Errorf("%d timeouts recorded, want 1", n)
	}
}

// The slow-body fault holds the lock past the timeout: the waiter behind it
// times out.
func TestSlowBodyOutlastsTheTimeout(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	// The slow body's own acquire gets seconds, the waiter's alone is short
	// (a make test beside two CPU hogs never saw the body begin in 60s: its
	// acquire, under the same 100ms, most likely timed out).
	w.env.SetLockTimeout(30 * time.Second)
	w.env.SetTiming(workers.Timing{SlowBody: time.Hour}) // ends when the test cancels it
	w.env.Faults.Add(workers.FaultSlowBody, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slow := goErr(func() error { return w.env.Hook(sctx, workers.RouteNotification, 1) })
	pgtest.Eventually(t, "the slow body is inside", func() bool { return w.rec.hasNote("slow body") })
	w.env.SetLockTimeout(100 * time.Millisecond)
	if err := w.env.Hook(ctx, workers.RoutePreToolUse, 1); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("waiter behind a slow body: %v, want ErrTimeout", err)
	}
	cancel()
	if err := recv(t, slow); !errors.Is(err, context.Canceled) {
		t.Errorf("slow body: %v, want it cancelled", err)
	}
}

// A section left behind by a process that died inside it (kill -9: no
// exit ran) is not an overlap for the living; a section of a process that
// lives is.
func TestDeadProcessSectionsIgnored(t *testing.T) {
	w := newWorld(t, 2)
	ctx := context.Background()
	if _, err := w.work.Exec(ctx, "INSERT INTO sections (agent_id, worker, proc) VALUES (1, 'hook', 'p1-dead')"); err != nil {
		t.Fatal(err)
	}
	if err := w.env.Hook(ctx, workers.RouteNotification, 1); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)

	// Another process, joined: its section counts, until its live session
	// ends as a killed process's does.
	other := workers.NewEnv(w.env.DB, w.locks, &rec{}, "p2-other")
	other.ConfigPath = w.env.ConfigPath
	other.Hooks = &workers.Hooks{At: w.hooks.at}
	if err := other.Join(ctx); err != nil {
		t.Fatal(err)
	}
	defer other.Leave()
	w.env.SetLocking(false)
	other.SetLocking(false)
	b := w.hooks.stop(t, workers.PointEntered, 2)
	inside := goErr(func() error { return other.Hook(ctx, workers.RouteNotification, 2) })
	b.wait(t)
	if err := w.env.Hook(ctx, workers.RoutePreToolUse, 2); err != nil {
		t.Fatal(err)
	}
	if n := w.rec.broken(workers.InvNoOverlap); n != 1 {
		t.Errorf("overlap with a living process's section caught %d times, want 1", n)
	}
	var pid int32
	if err := w.work.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
		workers.LiveAppPrefix+other.Proc).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := w.work.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "the other process's live session is gone", func() bool {
		var n int
		if err := w.work.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if err := w.env.Hook(ctx, workers.RouteSubagentStop, 2); err != nil {
		t.Fatal(err)
	}
	if n := w.rec.broken(workers.InvNoOverlap); n != 1 {
		t.Errorf("a dead process's section counted as an overlap (%d caught, want still 1)", n)
	}
	b.release()
	if err := recv(t, inside); err != nil {
		t.Fatal(err)
	}
}

// A hook that fails before its lock (here the agent does not exist) is a
// failed attempt, not the failure of a body that ran under the lock.
func TestHookFailureBeforeTheLock(t *testing.T) {
	w := newWorld(t, 1)
	if err := w.env.Hook(context.Background(), workers.RouteNotification, 99); err == nil {
		t.Fatal("a hook for a missing agent succeeded")
	}
	w.rec.mu.Lock()
	defer w.rec.mu.Unlock()
	if len(w.rec.attempts) != 1 || w.rec.attempts[0].Body || w.rec.attempts[0].Outcome != model.OutcomeError {
		t.Errorf("attempts %+v, want one failed attempt that is not a body's", w.rec.attempts)
	}
}

// Background workers skip a held agent and process the others.
func TestBackgroundSkipsHeldAgent(t *testing.T) {
	w := newWorld(t, 3)
	ctx := context.Background()
	b := w.hooks.stop(t, workers.PointEntered, 1)
	h := goErr(func() error { return w.env.Hook(ctx, workers.RouteNotification, 1) })
	b.wait(t)
	agents := []int32{1, 2, 3}
	for _, run := range []func() error{
		func() error { return w.env.Reap(ctx, agents) },
		func() error { return w.env.Poll(ctx, agents) },
		func() error { return w.env.Watch(ctx, agents) },
	} {
		if err := run(); err != nil {
			t.Fatal(err)
		}
	}
	b.release()
	if err := recv(t, h); err != nil {
		t.Fatal(err)
	}
	for _, k := range []workers.Kind{workers.KindReaper, workers.KindPoller, workers.KindWatchdog} {
		if s, a := w.rec.count(k, model.OutcomeSkipped), w.rec.count(k, model.OutcomeAcquired); s != 1 || a != 2 {
			t.Errorf("%s: skipped %d, acquired %d; want 1 and 2", k, s, a)
		}
	}
	if err := w.env.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)
}

// The status route takes no lock: it answers while the agent is held.
func TestStatusTakesNoLock(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	b := w.hooks.stop(t, workers.PointEntered, 1)
	h := goErr(func() error { return w.env.Hook(ctx, workers.RouteNotification, 1) })
	b.wait(t)
	if err := w.env.Hook(ctx, workers.RouteStatus, 1); err != nil {
		t.Fatal(err)
	}
	b.release()
	if err := recv(t, h); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)
}

func TestSetupIsIdempotentAndValidates(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	if err := workers.Setup(ctx, w.work, w.schema); err != nil {
		t.Errorf("second setup: %v", err)
	}
	if err := workers.Setup(ctx, w.work, "Bad-Name"); err == nil {
		t.Error("a bad schema name was accepted")
	}
	if err := w.env.Hook(ctx, "nonsense", 1); !errors.Is(err, workers.ErrUnknownRoute) {
		t.Errorf("unknown route: %v", err)
	}
}
