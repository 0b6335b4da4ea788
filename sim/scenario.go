package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
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

	// Systems are the lock systems the scenario runs (0: SystemAgents).
	Systems System
	// Conversations of the turns (seed 002); 1..HotConversations get
	// HotConvShare of the messages.
	Conversations, HotConversations int
	HotConvShare                    float64
	// TurnTTL is a turn's hold (0: 2s); TurnTiming its steps' durations.
	TurnTTL    time.Duration
	TurnTiming workers.TurnTiming
	// JobTiming is how long the jobs' work takes (seed 004); FloodShare the
	// share of map jobs and bulk jobs that go to the flooding project.
	JobTiming  workers.JobTiming
	FloodShare float64
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
	main       bool // Options.Goroutines and HookRate apply to it, as to hook drivers
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
		// Each hook request is a task with its own owner id, as a hook
		// service should give it: two requests of the process, one holding
		// and one waiting, are then two parties to a monitor's wait-for
		// graph, never one that waits for itself across kinds.
		ctx = lockcore.WithOwner(ctx, s.locks.Owner()+"/h"+strconv.FormatInt(s.tasks.Add(1), 10))
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

// Seed 002's units: a message, a burst (one message delivered twice at
// once), a pod crash, a Redis outage.
var (
	unitTurn = func(s *Sim, ctx context.Context) error {
		return s.turns.Deliver(ctx, s.pickConv(), s.turns.NewMessage())
	}
	unitTurnBurst = func(s *Sim, ctx context.Context) error {
		c, m := s.pickConv(), s.turns.NewMessage()
		return both(func() error { return s.turns.Deliver(ctx, c, m) }, func() error { return s.turns.Deliver(ctx, c, m) })
	}
	unitPodCrash = func(s *Sim, _ context.Context) error { s.turns.CrashPod(); return nil }
	unitOutage   = func(s *Sim, ctx context.Context) error { return s.outage(ctx) }
)

// outageFor is how long a Redis outage lasts.
const outageFor = 1500 * time.Millisecond

// outage pauses Redis for outageFor; the errors it causes are the fault's
// (ErrorStats.InFaults).
func (s *Sim) outage(ctx context.Context) error {
	s.rec.errs.fault(outageFor)
	return s.turns.Outage(ctx, outageFor)
}

// Seed 004's units. Map jobs and bulk jobs go to the flooding project
// with the scenario's FloodShare; reads and edits spread evenly.
var (
	unitMapWrite = func(s *Sim, ctx context.Context) error {
		return s.jobs.MapWrite(ctx, s.jobs.PickMap(s.jobs.PickProject(s.floodShare())))
	}
	unitViewer = func(s *Sim, ctx context.Context) error {
		return s.jobs.MapRead(ctx, s.jobs.PickMap(s.jobs.PickProject(s.evenShare())), false)
	}
	unitExport = func(s *Sim, ctx context.Context) error {
		return s.jobs.MapRead(ctx, s.jobs.PickMap(s.jobs.PickProject(s.floodShare())), true)
	}
	unitSketch = func(s *Sim, ctx context.Context) error {
		return s.jobs.SketchEdit(ctx, s.jobs.PickSketch(s.jobs.PickProject(s.evenShare())))
	}
	unitBulk = func(s *Sim, ctx context.Context) error {
		return s.jobs.Bulk(ctx, s.jobs.PickProject(s.floodShare()))
	}
	unitUpgrader = func(s *Sim, ctx context.Context) error {
		return s.jobs.Upgrader(ctx, s.jobs.PickMap(s.jobs.PickProject(s.evenShare())))
	}
	unitDie = func(s *Sim, ctx context.Context) error {
		return s.jobs.DieHolding(ctx, s.jobs.PickMap(s.jobs.PickProject(s.evenShare())))
	}
	unitStall = func(s *Sim, ctx context.Context) error {
		return s.jobs.Stall(ctx, s.jobs.PickMap(s.jobs.PickProject(s.evenShare())))
	}
	unitInterrupt = func(s *Sim, _ context.Context) error { s.jobs.InterruptNext(); return nil }
	unitFlood     = func(s *Sim, _ context.Context) error {
		s.jobs.Flood(floodJobs, func(fn func(context.Context)) { s.spawn(workers.KindMapWriter, fn) })
		return nil
	}
)

// floodJobs is how many jobs a flood queues at once.
const floodJobs = 16

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

// turnTiming is a typical turn: a brain run of about 120ms, 4% of runs
// outlasting the TTL (extending), a quarter of those forgetting to.
var turnTiming = workers.TurnTiming{Step: 5 * time.Millisecond, Brain: 120 * time.Millisecond, LongShare: 0.04, ForgetShare: 0.25}

// jobTiming is typical map and sketch work.
var jobTiming = workers.JobTiming{Step: 20 * time.Millisecond, Tiles: 160 * time.Millisecond, WriteShare: 0.4}

// turnDrivers are seed 002's workloads at rate scale×: messages, bursts,
// pod crashes and Redis outages.
func turnDrivers(scale float64) []Driver {
	return []Driver{
		{Name: "messages/s", Kind: workers.KindTurn, Rate: 12 * scale, Goroutines: 24, unit: unitTurn, main: scale == 1},
		{Name: "bursts/s", Kind: workers.KindTurn, Rate: 1 * scale, Goroutines: 2, unit: unitTurnBurst},
		{Name: "pod crashes/s", Rate: 0.1, Goroutines: 1, unit: unitPodCrash},
		{Name: "redis outages/s", Rate: 1.0 / 45, Goroutines: 1, unit: unitOutage},
	}
}

// jobDrivers are seed 004's workloads at rate scale×, and its faults.
func jobDrivers(scale float64) []Driver {
	return []Driver{
		{Name: "map writes/s", Kind: workers.KindMapWriter, Rate: 3 * scale, Goroutines: 6, unit: unitMapWrite},
		{Name: "viewers/s", Kind: workers.KindMapReader, Rate: 8 * scale, Goroutines: 6, unit: unitViewer},
		{Name: "exports/s", Kind: workers.KindMapReader, Rate: 1 * scale, Goroutines: 3, unit: unitExport},
		{Name: "sketch edits/s", Kind: workers.KindSketch, Rate: 4 * scale, Goroutines: 4, unit: unitSketch},
		{Name: "bulk jobs/s", Kind: workers.KindBulk, Rate: 0.4 * scale, Goroutines: 2, unit: unitBulk},
		{Name: "upgraders/s", Kind: workers.KindUpgrader, Rate: 1.5 * scale, Goroutines: 3, unit: unitUpgrader},
		{Name: "worker deaths/s", Rate: 0.1, Goroutines: 1, unit: unitDie},
		{Name: "heartbeat stalls/s", Rate: 0.1, Goroutines: 1, unit: unitStall},
		{Name: "interrupted writes/s", Rate: 0.1, Goroutines: 1, unit: unitInterrupt},
		{Name: "project floods/s", Rate: 0.05, Goroutines: 1, unit: unitFlood},
	}
}

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
		Description: "more blocked hooks than the hook service's original 25 connections: with the separate lock pool the holders still get work connections; " +
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
		Name: "acf",
		Description: "the ACF session mutex: conversation turns under the Redis mutex: pods with their own Lockers, multi-step turns " +
			"resumed by token, long runs that extend (and some that forget: the fence refuses their commit), bursts, pod crashes, Redis outages",
		Systems:       SystemTurns,
		Conversations: 40, HotConversations: 4, HotConvShare: 0.5,
		TurnTiming: turnTiming,
		Drivers:    turnDrivers(1),
	},
	{
		Name: "fole",
		Description: "the FOLE lease locks: map, sketch and project jobs under leases: tile sets by the atomic write sequence, viewers, " +
			"exports, sketch edits, bulk jobs (WithAll), upgraders, job caps with project p1 flooding; dead and stalled workers recovered",
		Systems:    SystemJobs,
		JobTiming:  jobTiming,
		FloodShare: 0.7,
		Drivers:    jobDrivers(1),
	},
	{
		Name: "all",
		Description: "the demo of every lock system at once: steady's hooks on advisory locks, acf's turns on Redis, " +
			"fole's jobs on leases",
		Agents: 200, Hot: 3, HotShare: 0.5,
		Timing: with(defaultTiming, func(t *workers.Timing) {
			t.SlowCapture = 2500 * time.Millisecond
			t.SlowCaptureShare = 0.005
		}),
		Systems:       SystemAgents | SystemTurns | SystemJobs,
		Conversations: 40, HotConversations: 4, HotConvShare: 0.5,
		TurnTiming: turnTiming,
		JobTiming:  jobTiming,
		FloodShare: 0.7,
		Drivers: append(append(append([]Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 60, Goroutines: 32, unit: unitHook},
		}, background()...), turnDrivers(0.7)...), jobDrivers(0.7)...),
	},
	{
		Name: "lock-order",
		Description: "two workloads that take an agent's advisory lock and a conversation's Redis session lock in opposite orders: " +
			"the order check reports the inversion at its first occurrence, with both acquisition sites, before any deadlock",
		Agents: 20, Hot: 0,
		Timing:        defaultTiming,
		Systems:       SystemAgents | SystemTurns,
		Conversations: 20,
		Drivers: []Driver{
			{Name: "hooks/s", Kind: workers.KindHook, Rate: 10, Goroutines: 4, unit: unitHook},
			{Name: "agent then session/s", Rate: 5, Goroutines: 2, unit: unitAgentThenSession},
			{Name: "session then agent/s", Rate: 5, Goroutines: 2, unit: unitSessionThenAgent},
		},
	},
	{
		Name: "deadlock",
		Description: "deadlocks across lock kinds on purpose: two processes each hold a lock of one kind and wait for the other's " +
			"(advisory and Redis, advisory and lease, Redis and lease), until a timeout breaks the cycle; the deadlock watch must " +
			"report every one within two polls",
		Systems: SystemDeadlocks,
		Drivers: []Driver{
			{Name: "advisory+redis cycles/s", Goroutines: 1, unit: unitDeadlock(0)},
			{Name: "advisory+lease cycles/s", Goroutines: 1, unit: unitDeadlock(1)},
			{Name: "redis+lease cycles/s", Goroutines: 1, unit: unitDeadlock(2)},
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

// SystemsOf returns the lock systems a scenario runs.
func SystemsOf(name string) (System, bool) {
	sc, ok := lookup(name)
	return sc.Systems, ok
}

func lookup(name string) (Scenario, bool) {
	for _, sc := range scenarios {
		if sc.Name == name {
			sc.Drivers = append([]Driver(nil), sc.Drivers...)
			if sc.Systems == 0 {
				sc.Systems = SystemAgents
			}
			return sc, true
		}
	}
	return Scenario{}, false
}

// faults are the names InjectFault accepts, with the system each needs.
var faults = []struct {
	name string
	sys  System
}{
	{workers.FaultKillHolder, SystemAgents}, {workers.FaultSlowBody, SystemAgents}, {workers.FaultReentrant, SystemAgents},
	{faultBurst, SystemAgents},
	{faultPodCrash, SystemTurns}, {faultOutage, SystemTurns}, {faultMessageBurst, SystemTurns},
	{faultDies, SystemJobs}, {faultStall, SystemJobs}, {faultInterrupt, SystemJobs}, {faultFlood, SystemJobs},
}

// Faults beyond the workers' own.
const (
	faultBurst        = "hook-burst"        // a burst of hooks at one agent
	faultPodCrash     = "pod-crash"         // a pod crashes mid-turn
	faultOutage       = "redis-outage"      // Redis stops answering for a while
	faultMessageBurst = "message-burst"     // 10 messages delivered twice each, on one conversation
	faultDies         = "worker-dies"       // a worker dies holding a map's write lease
	faultStall        = "heartbeat-stall"   // a writer's heartbeats stall past its lease
	faultInterrupt    = "interrupted-write" // the next map write stops half-way
	faultFlood        = "project-flood"     // p1 floods the job queue
)

// unitAgentThenSession takes an agent's AGENT lock, then, inside, a
// conversation's session lock (the handoff executor telling the
// conversation's brain).
func unitAgentThenSession(s *Sim, ctx context.Context) error {
	agent, conv := s.pickAny(), rand.Int32N(int32(max(s.sc.Conversations, 1)))+1
	return s.locks.With(ctx, lockcore.Pair(registry.SpaceAgent, agent), func(ctx context.Context) error {
		return s.sessions.With(ctx, workers.ConversationKey(conv), func(ctx context.Context) error {
			return workers.Pause(ctx, 2*time.Millisecond)
		})
	}, lockcore.Wait(2*time.Second))
}

// unitSessionThenAgent takes them the other way round (a turn that updates
// its agent): with unitAgentThenSession, a deadlock waiting to happen.
func unitSessionThenAgent(s *Sim, ctx context.Context) error {
	agent, conv := s.pickAny(), rand.Int32N(int32(max(s.sc.Conversations, 1)))+1
	return s.sessions.With(ctx, workers.ConversationKey(conv), func(ctx context.Context) error {
		return s.locks.With(ctx, lockcore.Pair(registry.SpaceAgent, agent), func(ctx context.Context) error {
			return workers.Pause(ctx, 2*time.Millisecond)
		}, lockcore.Wait(2*time.Second))
	})
}
