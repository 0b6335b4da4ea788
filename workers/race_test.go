package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// race is one of seed 001's races between two workloads on one agent. The
// first stops at point (after its read, before its write); the second then
// runs. Without locks the second runs to its end inside the first's
// critical section and inv breaks; with locks the second queues on the
// agent's lock until the first is done, and nothing breaks.
type race struct {
	name          string
	point         workers.Point
	setup         func(ctx context.Context, e *workers.Env, agent int32) error
	first, second func(ctx context.Context, e *workers.Env, agent int32) error
	inv           workers.Invariant
}

func hook(r workers.Route) func(context.Context, *workers.Env, int32) error {
	return func(ctx context.Context, e *workers.Env, a int32) error { return e.Hook(ctx, r, a) }
}

// currentCommand returns the agent's running command.
func currentCommand(t *testing.T, w *world, agent int32) int64 {
	t.Helper()
	var cmd int64
	if err := w.work.QueryRow(context.Background(), "SELECT current_command FROM agents WHERE id = $1", agent).Scan(&cmd); err != nil {
		t.Fatal(err)
	}
	return cmd
}

var races = []race{
	{
		name: "concurrent hooks lose an update", point: workers.PointApplyChecked,
		first: hook(workers.RouteNotification), second: hook(workers.RoutePreToolUse),
		inv: workers.InvNoLostUpdate,
	},
	{
		name: "skill injector injects twice", point: workers.PointInjectChecked,
		setup: func(ctx context.Context, e *workers.Env, a int32) error {
			// A new session, not yet injected (as session_start leaves it
			// before its own injection).
			_, err := e.DB.Exec(ctx, "UPDATE agents SET session_no = session_no + 1, prompt_injected_at = NULL WHERE id = $1", a)
			return err
		},
		first:  func(ctx context.Context, e *workers.Env, a int32) error { return e.InjectSkills(ctx, a) },
		second: func(ctx context.Context, e *workers.Env, a int32) error { return e.InjectSkills(ctx, a) },
		inv:    workers.InvInjectionOnce,
	},
	{
		name: "handoff initiated twice", point: workers.PointHandoffChecked,
		first:  func(ctx context.Context, e *workers.Env, a int32) error { return e.Handoff(ctx, a) },
		second: func(ctx context.Context, e *workers.Env, a int32) error { return e.Handoff(ctx, a) },
		inv:    workers.InvHandoffOnce,
	},
	{
		name: "remote agent sent to twice", point: workers.PointSendChecked,
		setup:  hook(workers.RouteStop),
		first:  func(ctx context.Context, e *workers.Env, a int32) error { return e.RemoteSend(ctx, a) },
		second: func(ctx context.Context, e *workers.Env, a int32) error { return e.RemoteSend(ctx, a) },
		inv:    workers.InvSendOnce,
	},
	{
		name: "background worker loses a hook's update", point: workers.PointCounterRead,
		first:  func(ctx context.Context, e *workers.Env, a int32) error { return e.Watch(ctx, []int32{a}) },
		second: hook(workers.RoutePreToolUse),
		inv:    workers.InvNoOverlap,
	},
}

func TestRacesWithoutLocksAreCaught(t *testing.T) {
	for _, rc := range races {
		t.Run(rc.name, func(t *testing.T) {
			w := newWorld(t, 2)
			ctx := context.Background()
			if rc.setup != nil {
				if err := rc.setup(ctx, w.env, 1); err != nil {
					t.Fatal(err)
				}
			}
			w.env.SetLocking(false)
			b := w.hooks.stop(t, rc.point, 1)
			first := goErr(func() error { return rc.first(ctx, w.env, 1) })
			b.wait(t)
			if err := rc.second(ctx, w.env, 1); err != nil {
				t.Fatal(err)
			}
			b.release()
			if err := recv(t, first); err != nil {
				t.Fatal(err)
			}
			if err := w.env.Audit(ctx); err != nil {
				t.Fatal(err)
			}
			if w.rec.broken(rc.inv) == 0 {
				t.Errorf("%s not caught without locks", rc.inv)
			}
			// Caught live, and not reported again by the audit, which finds
			// it marked in the database: a recorder need not remember it.
			if n := w.rec.violationCount(rc.inv); n != 1 {
				t.Errorf("%s reported %d times, want once", rc.inv, n)
			}
			if w.rec.broken(workers.InvNoOverlap) == 0 {
				t.Errorf("the overlapping sections were not caught")
			}
		})
	}
}

func TestRacesWithLocksSerialise(t *testing.T) {
	for _, rc := range races {
		t.Run(rc.name, func(t *testing.T) {
			w := newWorld(t, 2)
			ctx := context.Background()
			if rc.setup != nil {
				if err := rc.setup(ctx, w.env, 1); err != nil {
					t.Fatal(err)
				}
			}
			b := w.hooks.stop(t, rc.point, 1)
			first := goErr(func() error { return rc.first(ctx, w.env, 1) })
			b.wait(t)
			second := goErr(func() error { return rc.second(ctx, w.env, 1) })
			w.waitQueued(t, 1, 1)
			b.release()
			for _, ch := range []<-chan error{first, second} {
				if err := recv(t, ch); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.env.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if err := w.env.Audit(ctx); err != nil {
				t.Fatal(err)
			}
			w.rec.clean(t)
		})
	}
}

// Deferred stop vs session_end: the deferred stop wakes, locks, reads the
// command as RUNNING and is about to complete it when session_end arrives.
func TestDeferredStopRace(t *testing.T) {
	for _, locking := range []bool{false, true} {
		t.Run(map[bool]string{false: "no locks", true: "locks"}[locking], func(t *testing.T) {
			w := newWorld(t, 2)
			ctx := context.Background()
			if err := w.env.Hook(ctx, workers.RoutePromptSubmit, 1); err != nil {
				t.Fatal(err)
			}
			cmd := currentCommand(t, w, 1)
			w.env.SetLocking(locking)
			b := w.hooks.stop(t, workers.PointCompleteChecked, 1)
			deferred := goErr(func() error { return w.env.DeferredStop(ctx, 1, cmd) })
			b.wait(t)
			end := goErr(func() error { return w.env.Hook(ctx, workers.RouteSessionEnd, 1) })
			if locking {
				w.waitQueued(t, 1, 1)
			} else if err := recv(t, end); err != nil {
				t.Fatal(err)
			}
			b.release()
			if err := recv(t, deferred); err != nil {
				t.Fatal(err)
			}
			if locking {
				if err := recv(t, end); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.env.Audit(ctx); err != nil {
				t.Fatal(err)
			}
			if !locking {
				if w.rec.broken(workers.InvCommandOnce) == 0 {
					t.Error("double completion not caught")
				}
				return
			}
			w.rec.clean(t)
			if !w.rec.hasNote("already COMPLETE") {
				t.Error("session_end did not find the command COMPLETE after the deferred stop")
			}
		})
	}
}

// The reconciler applies an event the hook has not applied yet. Without
// locks the hook, stopped after finding it unapplied, applies it again; with
// locks the reconciler's try-lock skips the agent the hook holds.
func TestReconcilerVersusHook(t *testing.T) {
	for _, locking := range []bool{false, true} {
		t.Run(map[bool]string{false: "no locks", true: "locks"}[locking], func(t *testing.T) {
			w := newWorld(t, 2)
			ctx := context.Background()
			w.env.SetLocking(locking)
			b := w.hooks.stop(t, workers.PointApplyChecked, 1)
			h := goErr(func() error { return w.env.Hook(ctx, workers.RouteStop, 1) })
			b.wait(t)
			n, err := w.env.Reconcile(ctx, 100) // grace 0: the hook's event is due
			if err != nil {
				t.Fatal(err)
			}
			b.release()
			if err := recv(t, h); err != nil {
				t.Fatal(err)
			}
			if err := w.env.Audit(ctx); err != nil {
				t.Fatal(err)
			}
			if !locking {
				if n != 1 || w.rec.broken(workers.InvExactlyOnce) == 0 {
					t.Errorf("reconciler applied %d; duplicate not caught (%d)", n, w.rec.broken(workers.InvExactlyOnce))
				}
				return
			}
			if n != 0 || w.rec.count(workers.KindReconciler, model.OutcomeSkipped) != 1 {
				t.Errorf("reconciler applied %d, skipped %d; want 0 and 1", n, w.rec.count(workers.KindReconciler, model.OutcomeSkipped))
			}
			w.rec.clean(t)
		})
	}
}

// Summarisation dedup: FOR UPDATE NOWAIT makes a second summariser return
// nothing at once while the first makes its call; a third, afterwards, gets
// the stored summary. Without the row lock, both call.
func TestSummariserNowait(t *testing.T) {
	for _, locking := range []bool{false, true} {
		t.Run(map[bool]string{false: "no locks", true: "locks"}[locking], func(t *testing.T) {
			w := newWorld(t, 2)
			ctx := context.Background()
			if err := w.env.Hook(ctx, workers.RoutePromptSubmit, 1); err != nil {
				t.Fatal(err)
			}
			var turn int64
			if err := w.work.QueryRow(ctx, "SELECT current_turn FROM agents WHERE id = 1").Scan(&turn); err != nil {
				t.Fatal(err)
			}
			w.env.SetLocking(locking)
			b := w.hooks.stop(t, workers.PointSummaryChecked, 1)
			first := goErr(func() error { _, err := w.env.Summarise(ctx, turn); return err })
			b.wait(t)
			got, err := w.env.Summarise(ctx, turn)
			if err != nil {
				t.Fatal(err)
			}
			b.release()
			if err := recv(t, first); err != nil {
				t.Fatal(err)
			}
			if err := w.env.Audit(ctx); err != nil {
				t.Fatal(err)
			}
			if !locking {
				if w.rec.broken(workers.InvSummaryOnce) == 0 {
					t.Error("two summary calls for one turn not caught")
				}
				return
			}
			if got != "" || w.rec.count(workers.KindSummariser, model.OutcomeSkipped) != 1 {
				t.Errorf("second summariser returned %q, skipped %d; want nothing, 1", got, w.rec.count(workers.KindSummariser, model.OutcomeSkipped))
			}
			again, err := w.env.Summarise(ctx, turn)
			if err != nil || again == "" {
				t.Errorf("third summariser: %q, %v; want the stored summary", again, err)
			}
			w.rec.clean(t)
		})
	}
}

// Config editor: without flock, an editor that read the file before another
// saved writes it back without the other's key.
func TestConfigEditorLosesKeyWithoutFlock(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	w.env.SetLocking(false)
	b := w.hooks.stop(t, workers.PointConfigRead, 0)
	first := goErr(func() error { return w.env.EditConfig(ctx, "a", "1") })
	b.wait(t)
	if err := w.env.EditConfig(ctx, "b", "2"); err != nil {
		t.Fatal(err)
	}
	b.release()
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}
	if err := w.env.AuditConfig(); err != nil {
		t.Fatal(err)
	}
	if w.rec.broken(workers.InvConfigKeys) != 1 {
		t.Errorf("lost key caught %d times, want 1", w.rec.broken(workers.InvConfigKeys))
	}
}

// With flock, a second editor waits for the first: with a short timeout it
// gives up (proving it could not get in); afterwards edits keep every key.
func TestConfigEditorFlock(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	b := w.hooks.stop(t, workers.PointConfigRead, 0)
	first := goErr(func() error { return w.env.EditConfig(ctx, "a", "1") })
	b.wait(t)
	w.env.SetLockTimeout(100 * time.Millisecond)
	if err := w.env.EditConfig(ctx, "b", "2"); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("second editor while the first holds the flock: %v, want ErrTimeout", err)
	}
	w.env.SetLockTimeout(0)
	b.release()
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}
	if err := w.env.EditConfig(ctx, "c", "3"); err != nil {
		t.Fatal(err)
	}
	if err := w.env.AuditConfig(); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t)
	if n := w.rec.count(workers.KindConfigEditor, model.OutcomeTimeout); n != 1 {
		t.Errorf("%d timeouts recorded, want 1", n)
	}
}

// Two summarisers without the row lock, both inside their call at once:
// the second's claim is counted live, though the first's is not committed
// yet (it is made inside the transaction that holds the turn).
func TestSummaryClaimsSeeEachOtherLive(t *testing.T) {
	w := newWorld(t, 2)
	ctx := context.Background()
	if err := w.env.Hook(ctx, workers.RoutePromptSubmit, 1); err != nil {
		t.Fatal(err)
	}
	var turn int64
	if err := w.work.QueryRow(ctx, "SELECT current_turn FROM agents WHERE id = 1").Scan(&turn); err != nil {
		t.Fatal(err)
	}
	w.env.SetLocking(false)
	claimed := w.hooks.stop(t, workers.PointSummaryClaimed, 1)
	first := goErr(func() error { _, err := w.env.Summarise(ctx, turn); return err })
	claimed.wait(t) // the first has claimed the call, uncommitted
	second := goErr(func() error { _, err := w.env.Summarise(ctx, turn); return err })
	// The second found no summary (the first has not stored one) and now
	// waits, in its claim, for the first's transaction.
	pgtest.Eventually(t, "the second summariser's claim waits for the first's transaction", func() bool {
		var n int
		err := w.work.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	claimed.release()
	for _, ch := range []<-chan error{first, second} {
		if err := recv(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.rec.broken(workers.InvSummaryOnce); n != 1 {
		t.Errorf("two summary calls on one turn reported %d times live, want 1", n)
	}
	// The audit finds the same thing and does not report it again.
	if err := w.env.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.rec.violationCount(workers.InvSummaryOnce); n != 1 {
		t.Errorf("reported %d times after the audit, want 1", n)
	}
}

// A session_start hook injects the skills inline, inside its own section:
// with the locks off that is still one section, not an overlap.
func TestSessionStartInjectsInsideItsSection(t *testing.T) {
	for _, locking := range []bool{true, false} {
		t.Run(map[bool]string{false: "no locks", true: "locks"}[locking], func(t *testing.T) {
			w := newWorld(t, 1)
			w.env.SetLocking(locking)
			if err := w.env.Hook(context.Background(), workers.RouteSessionStart, 1); err != nil {
				t.Fatal(err)
			}
			w.rec.clean(t)
			if n := w.rec.count(workers.KindSkillInjector, model.OutcomeAcquired); n != 0 {
				t.Errorf("the injection took a section of its own %d time(s)", n)
			}
		})
	}
}

// Config editor: the file holds the keys saved since about the last check,
// not every key ever saved: the editor prunes its own checked keys.
func TestConfigFileStaysSmall(t *testing.T) {
	w := newWorld(t, 1)
	ctx := context.Background()
	for i := range 300 {
		if err := w.env.EditConfig(ctx, fmt.Sprintf("%s.%d", w.env.Proc, i), "v"); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			if err := w.env.Audit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := os.ReadFile(w.env.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]string{}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg) > 51 {
		t.Errorf("the config file holds %d keys after 300 edits checked every 50", len(cfg))
	}
	w.rec.clean(t)
}
