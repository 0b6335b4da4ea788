package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/locktop/locktop/workers"
)

// Scenario is a named mix of workloads: how many agents, which are hot, the
// drivers that generate work and at what rates, how long the work takes.
type Scenario struct {
	Name        string
	Description string
	Agents      int     // agents 1..Agents
	Hot         int     // agents 1..Hot are hot
	HotShare    float64 // share of hook events that go to a hot agent
	// LockTimeout is the blocking acquires' timeout (0: lockcore's 15s).
	LockTimeout time.Duration
	Timing      workers.Timing
	Drivers     []Driver
}

// Driver generates one kind of work: Goroutines loops, each running one
// unit after another with random gaps between them, together about Rate
// units per second (0: no gaps, as fast as the goroutines go).
type Driver struct {
	Name       string       // the rate's name in SimStatus.Rates, e.g. "hooks/s"
	Kind       workers.Kind // the worker kind it drives; "" for faults
	Rate       float64
	Goroutines int
	unit       func(s *Sim, ctx context.Context) error
}

// routeWeights is how often each hook route fires, relative to the others.
var routeWeights = []struct {
	route  workers.Route
	weight int
}{
	{workers.RouteSessionStart, 1}, {workers.RouteSessionEnd, 1}, {workers.RoutePromptSubmit, 3},
	{workers.RouteStop, 3}, {workers.RouteNotification, 2}, {workers.RoutePreToolUse, 4},
	{workers.RoutePostToolUse, 4}, {workers.RouteSubagentStop, 1},
}

var routeTotal = func() int {
	n := 0
	for _, r := range routeWeights {
		n += r.weight
	}
	return n
}()

func pickRoute() workers.Route {
	n := rand.IntN(routeTotal)
	for _, r := range routeWeights {
		if n < r.weight {
			return r.route
		}
		n -= r.weight
	}
	return workers.RouteNotification
}

// The units of work drivers run.
var (
	unitHook = func(s *Sim, ctx context.Context) error {
		return s.env.Hook(ctx, pickRoute(), s.pick())
	}
	unitStatus = func(s *Sim, ctx context.Context) error {
		return s.env.Status(ctx, s.pickAny())
	}
	unitReaper = func(s *Sim, ctx context.Context) error {
		return s.env.Reap(ctx, s.batch(16))
	}
	unitReconciler = func(s *Sim, ctx context.Context) error {
		_, err := s.env.Reconcile(ctx, 200)
		return err
	}
	unitPoller = func(s *Sim, ctx context.Context) error {
		return s.env.Poll(ctx, s.batch(16))
	}
	unitWatchdog = func(s *Sim, ctx context.Context) error {
		return s.env.Watch(ctx, s.batch(16))
	}
	unitConfig = func(s *Sim, ctx context.Context) error {
		n := s.configSeq.Add(1)
		return s.env.EditConfig(ctx, fmt.Sprintf("%s.%d", s.proc, n), time.Now().UTC().Format(time.RFC3339Nano))
	}
	// unitInjector starts a session (whose hook injects the skills inline)
	// while another path injects for the same agent, as the seed's two
	// injection paths may.
	unitInjector = func(s *Sim, ctx context.Context) error {
		a := s.pick()
		return both(
			func() error { return s.env.Hook(ctx, workers.RouteSessionStart, a) },
			func() error { return s.env.InjectSkills(ctx, a) })
	}
	// unitHandoff asks for two handoffs of one agent at once (double
	// initiation).
	unitHandoff = func(s *Sim, ctx context.Context) error {
		a := s.pick()
		return both(func() error { return s.env.Handoff(ctx, a) }, func() error { return s.env.Handoff(ctx, a) })
	}
	// unitRemote sends to one agent from two remote callers at once.
	unitRemote = func(s *Sim, ctx context.Context) error {
		a := s.pick()
		return both(func() error { return s.env.RemoteSend(ctx, a) }, func() error { return s.env.RemoteSend(ctx, a) })
	}
	// unitStopRace is a prompt, a stop (whose deferred stop sleeps, then
	// locks) and a session_end arriving about when the deferred stop wakes.
	unitStopRace = func(s *Sim, ctx context.Context) error {
		a := s.pick()
		if err := s.env.Hook(ctx, workers.RoutePromptSubmit, a); err != nil {
			return err
		}
		if err := s.env.Hook(ctx, workers.RouteStop, a); err != nil {
			return err
		}
		if err := workers.Pause(ctx, s.env.Timing().DeferredStop); err != nil {
			return err
		}
		return s.env.Hook(ctx, workers.RouteSessionEnd, a)
	}
	// unitSummaries summarises the newest unsummarised turn from three
	// callers at once.
	unitSummaries = func(s *Sim, ctx context.Context) error {
		var turn int64
		if err := s.db.Get(ctx, "SELECT coalesce(max(id), 0) FROM turns WHERE summary IS NULL", nil, &turn); err != nil {
			return err
		}
		if turn == 0 {
			return nil
		}
		sum := func() error { _, err := s.env.Summarise(ctx, turn); return err }
		return both(sum, sum, sum)
	}
)

// unitFault arms one fault.
func unitFault(name string) func(*Sim, context.Context) error {
	return func(s *Sim, _ context.Context) error {
		s.env.Faults.Add(name, 1)
		return nil
	}
}

// both runs fns at once and returns the first error.
func both(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// defaultTiming is the work of a typical agent: a few milliseconds between
// commits, tens for calls out of the process.
var defaultTiming = workers.Timing{
	Step:           10 * time.Millisecond,
	LLM:            60 * time.Millisecond,
	Inject:         20 * time.Millisecond,
	Send:           15 * time.Millisecond,
	Handoff:        30 * time.Millisecond,
	DeferredStop:   150 * time.Millisecond,
	ConfigEdit:     10 * time.Millisecond,
	ReconcileGrace: time.Second,
}

// background is every background worker at a gentle rate.
func background() []Driver {
	return []Driver{
		{Name: "reaper cycles/s", Kind: workers.KindReaper, Rate: 2, Goroutines: 1, unit: unitReaper},
		{Name: "reconciler cycles/s", Kind: workers.KindReconciler, Rate: 2, Goroutines: 1, unit: unitReconciler},
		{Name: "poller cycles/s", Kind: workers.KindPoller, Rate: 2, Goroutines: 1, unit: unitPoller},
		{Name: "watchdog cycles/s", Kind: workers.KindWatchdog, Rate: 2, Goroutines: 1, unit: unitWatchdog},
	}
}

// services is the other workloads at a gentle rate.
func services() []Driver {
	return []Driver{
		{Name: "status/s", Kind: workers.KindStatus, Rate: 10, Goroutines: 2, unit: unitStatus},
		{Name: "config edits/s", Kind: workers.KindConfigEditor, Rate: 2, Goroutines: 2, unit: unitConfig},
		{Name: "skill injections/s", Kind: workers.KindSkillInjector, Rate: 1, Goroutines: 2, unit: unitInjector},
		{Name: "handoffs/s", Kind: workers.KindHandoff, Rate: 0.5, Goroutines: 2, unit: unitHandoff},
		{Name: "remote sends/s", Kind: workers.KindRemote, Rate: 1, Goroutines: 2, unit: unitRemote},
	}
}

func with(t workers.Timing, f func(*workers.Timing)) workers.Timing { f(&t); return t }

// scenarios are the named scenarios, the default first.
var scenarios = []Scenario{
	{
		Name:        "steady",
		Description: "the demo: many agents, hooks at a steady rate with a few hot agents (holders with queued waiters within seconds), every background worker",
		Agents:      200, Hot: 3, HotShare: 0.5,
		// Now and then a hook's capture stalls past the reconcile grace, so
		// that with the locks off the reconciler applies its event too.
		Timing: with(defaultTiming, func(t *workers.Timing) {
			t.SlowCapture = 2500 * time.Millisecond
			t.SlowCaptureShare = 0.005
		}),
		Drivers: append(append([]Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 80, Goroutines: 48, unit: unitHook},
		}, background()...), services()...),
	},
	{
		Name:        "hook-storm",
		Description: "a runaway hook storm on one hot agent: a long queue of blocking waiters; background workers skip it",
		Agents:      50, Hot: 1, HotShare: 0.9,
		Timing: with(defaultTiming, func(t *workers.Timing) { t.Step = 6 * time.Millisecond }),
		Drivers: append([]Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 30, Goroutines: 64, unit: unitHook},
		}, background()...),
	},
	{
		Name:        "reaper-contention",
		Description: "hooks on a few agents while reapers, pollers and watchdogs sweep them all: try-locks skip held agents, the reaper commits inside each lock",
		Agents:      20, Hot: 4, HotShare: 0.6,
		Timing: defaultTiming,
		Drivers: []Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 40, Goroutines: 24, unit: unitHook},
			{Name: "reaper cycles/s", Kind: workers.KindReaper, Rate: 20, Goroutines: 4, unit: unitReaper},
			{Name: "reconciler cycles/s", Kind: workers.KindReconciler, Rate: 4, Goroutines: 1, unit: unitReconciler},
			{Name: "poller cycles/s", Kind: workers.KindPoller, Rate: 10, Goroutines: 2, unit: unitPoller},
			{Name: "watchdog cycles/s", Kind: workers.KindWatchdog, Rate: 10, Goroutines: 2, unit: unitWatchdog},
		},
	},
	{
		Name:        "deferred-stop-race",
		Description: "stop then session_end on one agent, the deferred stop waking just as session_end arrives: it must re-read the command and skip it",
		Agents:      30, Hot: 0,
		Timing: with(defaultTiming, func(t *workers.Timing) { t.DeferredStop = 60 * time.Millisecond; t.Step = 4 * time.Millisecond }),
		Drivers: append([]Driver{
			{Name: "stop races/s", Kind: workers.KindDeferredStop, Rate: 12, Goroutines: 12, unit: unitStopRace},
		}, background()...),
	},
	{
		Name: "reconciler-race",
		Description: "hooks whose progress capture stalls past the reconcile grace: the reconciler finds their events due; " +
			"with the lock it skips the held agent, without it the event is applied twice",
		Agents: 20, Hot: 4, HotShare: 0.5,
		Timing: with(defaultTiming, func(t *workers.Timing) {
			t.ReconcileGrace = 300 * time.Millisecond
			t.SlowCapture = 1200 * time.Millisecond
			t.SlowCaptureShare = 0.2
		}),
		Drivers: []Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 15, Goroutines: 12, unit: unitHook},
			{Name: "reconciler cycles/s", Kind: workers.KindReconciler, Rate: 5, Goroutines: 1, unit: unitReconciler},
		},
	},
	{
		Name:        "summary-dedup",
		Description: "several summarisers on the same turn: FOR UPDATE NOWAIT lets one make the call, the others return nothing",
		Agents:      30, Hot: 5, HotShare: 0.5,
		Timing: with(defaultTiming, func(t *workers.Timing) { t.LLM = 80 * time.Millisecond }),
		Drivers: []Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 30, Goroutines: 16, unit: unitHook},
			{Name: "summary bursts/s", Kind: workers.KindSummariser, Rate: 10, Goroutines: 4, unit: unitSummaries},
		},
	},
	{
		Name:        "config-race",
		Description: "many config editors at once: flock around read-modify-write keeps every key",
		Agents:      10, Hot: 0,
		Timing: with(defaultTiming, func(t *workers.Timing) { t.ConfigEdit = 4 * time.Millisecond }),
		Drivers: []Driver{
			{Name: "config edits/s", Kind: workers.KindConfigEditor, Rate: 60, Goroutines: 8, unit: unitConfig},
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 5, Goroutines: 4, unit: unitHook},
		},
	},
	{
		Name: "pool-exhaustion",
		Description: "more blocked hooks than the seed's 25 connections: with the separate lock pool the holders still get work connections; " +
			"with --shared-pool the waiters hold every connection and the holders starve until timeouts free some",
		Agents: 6, Hot: 6, HotShare: 1,
		LockTimeout: 3 * time.Second,
		Timing:      with(defaultTiming, func(t *workers.Timing) { t.Step = 5 * time.Millisecond }),
		Drivers: []Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 0, Goroutines: 60, unit: unitHook},
			{Name: "reconciler cycles/s", Kind: workers.KindReconciler, Rate: 2, Goroutines: 1, unit: unitReconciler},
		},
	},
	{
		Name:        "timeouts",
		Description: "bodies that outlast the lock timeout: waiters time out, and the reconciler applies their events later",
		Agents:      10, Hot: 3, HotShare: 0.8,
		LockTimeout: time.Second,
		Timing: with(defaultTiming, func(t *workers.Timing) {
			t.SlowBody = 1500 * time.Millisecond
			t.ReconcileGrace = 500 * time.Millisecond
		}),
		Drivers: []Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 20, Goroutines: 24, unit: unitHook},
			{Name: "slow bodies/s", Rate: 0.5, Goroutines: 1, unit: unitFault(workers.FaultSlowBody)},
			{Name: "reconciler cycles/s", Kind: workers.KindReconciler, Rate: 2, Goroutines: 1, unit: unitReconciler},
		},
	},
	{
		Name:        "kill-holder",
		Description: "the backend holding a lock is terminated mid-section: the lock frees, the next waiter gets it, the holder sees ErrLost and stops (its late writes refused by the fence), nothing leaks",
		Agents:      10, Hot: 2, HotShare: 0.8,
		Timing: defaultTiming,
		Drivers: []Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 20, Goroutines: 16, unit: unitHook},
			{Name: "kills/s", Rate: 0.7, Goroutines: 1, unit: unitFault(workers.FaultKillHolder)},
			{Name: "reconciler cycles/s", Kind: workers.KindReconciler, Rate: 2, Goroutines: 1, unit: unitReconciler},
		},
	},
	{
		Name: "scale",
		Description: "the scale benchmark: 10,000 agents, 1,000 hook goroutines firing back to back at random agents, " +
			"every background worker and service",
		Agents: 10000, Hot: 0,
		Timing: defaultTiming,
		Drivers: append(append([]Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 0, Goroutines: 1000, unit: unitHook},
		}, background()...), services()...),
	},
}

// Scenarios returns the names of the scenarios, the default ("steady")
// first.
func Scenarios() []string {
	out := make([]string, len(scenarios))
	for i, sc := range scenarios {
		out[i] = sc.Name
	}
	return out
}

// Describe returns a scenario's one-line description.
func Describe(name string) (string, bool) {
	sc, ok := lookup(name)
	return sc.Description, ok
}

func lookup(name string) (Scenario, bool) {
	for _, sc := range scenarios {
		if sc.Name == name {
			sc.Drivers = append([]Driver(nil), sc.Drivers...)
			return sc, true
		}
	}
	return Scenario{}, false
}

// faults are the names InjectFault accepts.
var faults = []string{workers.FaultKillHolder, workers.FaultSlowBody, workers.FaultReentrant, faultBurst}

// faultBurst fires a burst of hooks at one agent.
const faultBurst = "hook-burst"
