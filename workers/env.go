package workers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// Kind names a kind of worker, as counters and reports key them.
type Kind string

// Worker kinds.
const (
	KindHook          Kind = "hook"           // the 8 mutating hook routes
	KindStatus        Kind = "status"         // the read-only status route (no lock)
	KindReaper        Kind = "reaper"         // agent reaper
	KindReconciler    Kind = "reconciler"     // transcript reconciler
	KindPoller        Kind = "poller"         // context poller
	KindWatchdog      Kind = "watchdog"       // tmux watchdog
	KindDeferredStop  Kind = "deferred_stop"  // deferred stop
	KindSummariser    Kind = "summariser"     // turn summarisation
	KindConfigEditor  Kind = "config_editor"  // config editor
	KindSkillInjector Kind = "skill_injector" // persona skill injector
	KindHandoff       Kind = "handoff"        // handoff executor
	KindRemote        Kind = "remote"         // remote agent service

	// Seed 002 (Turns).
	KindTurn Kind = "turn" // a conversation turn under the Redis session mutex

	// Seed 004 (Jobs).
	KindMapWriter Kind = "map_writer" // tile generation and calibration (map write, atomic write sequence)
	KindMapReader Kind = "map_reader" // viewers and exports (map read)
	KindSketch    Kind = "sketch"     // sketch edits (sketch write)
	KindBulk      Kind = "bulk_job"   // bulk project jobs (WithAll)
	KindUpgrader  Kind = "upgrader"   // upgradeable readers that may decide to write
)

// Kinds lists seed 001's worker kinds, in report order.
var Kinds = []Kind{
	KindHook, KindStatus, KindReaper, KindReconciler, KindPoller, KindWatchdog, KindDeferredStop,
	KindSummariser, KindConfigEditor, KindSkillInjector, KindHandoff, KindRemote,
}

// TurnKinds and JobKinds are the worker kinds of seeds 002 and 004.
var (
	TurnKinds = []Kind{KindTurn}
	JobKinds  = []Kind{KindMapWriter, KindMapReader, KindSketch, KindBulk, KindUpgrader}
)

// AllKinds lists every worker kind of every seed, in report order.
var AllKinds = append(append(append([]Kind(nil), Kinds...), TurnKinds...), JobKinds...)

// Invariant names a property the checks watch.
type Invariant string

// Invariants, in report order.
const (
	InvNoOverlap          Invariant = "no_overlapping_sections"     // no two critical sections on one agent overlap
	InvExactlyOnce        Invariant = "events_applied_exactly_once" // every hook event applied exactly once
	InvNoLostUpdate       Invariant = "no_lost_update"              // no read-modify-write loses another's write
	InvSummaryOnce        Invariant = "one_summary_call_per_turn"   // at most one summary call per turn
	InvInjectionOnce      Invariant = "one_skill_injection_per_agent_session"
	InvConfigKeys         Invariant = "no_config_key_lost"
	InvCommandOnce        Invariant = "one_completion_per_command" // deferred stop vs session_end
	InvHandoffOnce        Invariant = "one_handoff_per_generation"
	InvSendOnce           Invariant = "one_remote_send_per_readiness"
	InvNoLeaks            Invariant = "no_lock_or_connection_left"
	claimSummary                    = "summary"
	claimInjection                  = "injection"
	claimCompletion                 = "completion"
	claimHandoff                    = "handoff"
	claimSend                       = "send"
	defaultSectionHorizon           = 10 * time.Minute
)

// Seed 002's invariants (Turns), the races its "What It Prevents" lists.
const (
	InvTurnSequence Invariant = "turn_numbers_gapless_no_collision" // per conversation
	InvAnsweredOnce Invariant = "no_message_answered_twice"
	InvStaleStep    Invariant = "no_step_applied_from_stale_state" // scenario step advanced twice from one state
	InvStaleFence   Invariant = "no_commit_with_stale_fence"       // a commit whose fence a newer grant superseded
	InvTurnLocks    Invariant = "turn_locks_released_or_expired"   // none leaked
)

// Seed 004's invariants (Jobs).
const (
	InvExclusiveWriter Invariant = "no_writer_beside_another_holder"
	InvTileSet         Invariant = "no_torn_tile_set"
	InvRecovery        Invariant = "stale_recovery_audited_and_justified"
	InvJobCaps         Invariant = "job_caps_never_exceeded"
	InvStarvation      Invariant = "no_project_starved"
	InvDeadlock        Invariant = "multi_lock_jobs_end_in_bound" // no deadlock
)

// Invariants lists seed 001's invariants, in report order.
var Invariants = []Invariant{
	InvNoOverlap, InvExactlyOnce, InvNoLostUpdate, InvSummaryOnce, InvInjectionOnce,
	InvConfigKeys, InvCommandOnce, InvHandoffOnce, InvSendOnce, InvNoLeaks,
}

// TurnInvariants and JobInvariants are the invariants of seeds 002 and
// 004; a run of either reports InvNoLeaks too.
var (
	TurnInvariants = []Invariant{InvTurnSequence, InvAnsweredOnce, InvStaleStep, InvStaleFence, InvTurnLocks}
	JobInvariants  = []Invariant{InvExclusiveWriter, InvTileSet, InvRecovery, InvJobCaps, InvStarvation, InvDeadlock}
)

// AllInvariants lists every invariant of every seed, in report order.
var AllInvariants = append(append(append([]Invariant(nil), Invariants...), TurnInvariants...), JobInvariants...)

// claimInvariant maps a claim kind to the invariant it guards.
var claimInvariant = map[string]Invariant{
	claimSummary: InvSummaryOnce, claimInjection: InvInjectionOnce, claimCompletion: InvCommandOnce,
	claimHandoff: InvHandoffOnce, claimSend: InvSendOnce,
}

// Attempt is the outcome of one lock attempt by a worker (or, with locking
// off, of one unlocked run of its body).
type Attempt struct {
	Kind    Kind
	Route   string // hook route, when Kind is KindHook
	Key     lockcore.Key
	Label   string        // what was locked, when it is not an advisory key ("turn 7", "config")
	Outcome model.Outcome // acquired, skipped, timeout, reentrant, lost, canceled or error
	Wait    time.Duration // from the attempt to the grant or the failure
	Err     error
	// Body marks a failure of a body that had already run under the lock
	// (or of the release after it): it counts as an error, not as a
	// second attempt.
	Body bool
	// Loss describes the critical section of a lost lock (Outcome lost):
	// whether it was aborted, and how.
	Loss *Loss
}

// Recorder receives what the workloads do. It must be safe for concurrent
// use and quick: it is called on the workers' goroutines.
type Recorder interface {
	// Attempt reports one lock attempt and its outcome.
	Attempt(a Attempt)
	// Section reports a critical section that ran to its end.
	Section(kind Kind)
	// Violation reports a broken invariant. subject identifies what broke
	// (a section, an event, a counter value, a claim). Each broken subject
	// is reported once: the database marks what the live checks reported,
	// and Audit reports only the rest, so a recorder need not remember
	// subjects.
	Violation(inv Invariant, subject, detail string)
	// Note reports something worth showing that is neither (e.g. "command
	// already COMPLETE, skipped").
	Note(kind Kind, key lockcore.Key, detail string)
}

// Point names a place in a workload where a test may stop it, to force an
// interleaving.
type Point string

// Points where Hooks.At is called.
const (
	PointEntered         Point = "entered"          // inside a section, after its entry was registered
	PointApplyChecked    Point = "apply.checked"    // an event found unapplied and the counter read, before the writes
	PointSummaryChecked  Point = "summary.checked"  // a turn found without a summary, before the call
	PointSummaryClaimed  Point = "summary.claimed"  // the call claimed, inside the turn's transaction, before it is made
	PointInjectChecked   Point = "inject.checked"   // prompt_injected_at found empty, before injecting
	PointCompleteChecked Point = "complete.checked" // a command found RUNNING, before completing it
	PointConfigRead      Point = "config.read"      // the config file read, before writing it back
	PointHandoffChecked  Point = "handoff.checked"  // the generation read, before the handoff
	PointSendChecked     Point = "send.checked"     // the agent found ready, before the send
	PointCounterRead     Point = "counter.read"     // a background worker's counter read, before the write
)

// Hooks lets tests stop workloads at named points. At is called with the
// workload's context; it may block (a barrier) and must return when ctx
// ends.
type Hooks struct {
	At func(ctx context.Context, p Point, agent int32)
}

// Timing is how long the simulated work takes. Every duration is the mean
// of a uniform jitter of plus or minus half.
type Timing struct {
	Step           time.Duration // processing between a body's commits
	LLM            time.Duration // one summary call
	Inject         time.Duration // sending skills to the agent's terminal
	Send           time.Duration // a remote send
	Handoff        time.Duration // preparing a handoff
	DeferredStop   time.Duration // deferred stop's sleep before it locks
	ConfigEdit     time.Duration // between reading and writing the config
	ReconcileGrace time.Duration // how old a transcript entry must be before the reconciler applies it
	SlowBody       time.Duration // extra time of a slow body (fault or scenario)
	// SlowCapture is how long a hook's progress capture takes when it
	// stalls (the seed's capture waits on the transcript): between finding
	// its event unapplied and applying it. Longer than ReconcileGrace, it
	// is the window of seed 001's "progress capture vs reconciler" race.
	SlowCapture time.Duration
	// SlowCaptureShare is the share of hook captures that stall (0: none).
	SlowCaptureShare float64
}

// Faults are pending one-shot faults; the next hook section takes one.
type Faults struct {
	killHolder atomic.Int32
	slowBody   atomic.Int32
	reentrant  atomic.Int32
}

// Fault names.
const (
	FaultKillHolder = "kill-holder" // the holder's backend is terminated mid-section
	FaultSlowBody   = "slow-body"   // a section outlasts the lock timeout
	FaultReentrant  = "reentrant"   // a section tries to take its own key again
)

// Add arms n more of the named fault. It reports false for an unknown name.
func (f *Faults) Add(name string, n int32) bool {
	switch name {
	case FaultKillHolder:
		f.killHolder.Add(n)
	case FaultSlowBody:
		f.slowBody.Add(n)
	case FaultReentrant:
		f.reentrant.Add(n)
	default:
		return false
	}
	return true
}

// Clear disarms every pending fault.
func (f *Faults) Clear() {
	f.killHolder.Store(0)
	f.slowBody.Store(0)
	f.reentrant.Store(0)
}

func take(c *atomic.Int32) bool {
	for {
		n := c.Load()
		if n <= 0 {
			return false
		}
		if c.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Env is what every workload runs with. Create it with NewEnv; it is safe
// for concurrent use, and its knobs (locking, timing) may change while
// workloads run.
type Env struct {
	DB     *DB
	Locks  *lockcore.Service
	Rec    Recorder
	Proc   string // this process's token; it tags the rows the process writes
	Hooks  *Hooks // nil outside tests
	Faults Faults

	// Spawn runs follow-up work (deferred stops, summarisation) that a hook
	// schedules, on a goroutine the caller tracks. When it is nil the
	// follow-up work is dropped.
	Spawn func(kind Kind, fn func(ctx context.Context))

	// ConfigPath is the JSON file the config editor edits; its lock file is
	// ConfigPath + ".lock".
	ConfigPath string

	locking      atomic.Bool
	timing       atomic.Pointer[Timing]
	lockTimeout  atomic.Int64
	horizon      time.Duration
	configKeys   configBook
	audited      keySet // subjects Audit reported, so a second Audit does not again
	eventCounter atomic.Int64
	since        atomic.Pointer[time.Time] // the run's start, on the server's clock (Begin)
	unexited     idSet                     // sections whose row exit could not delete yet

	liveMu   sync.Mutex
	live     *liveSession // the live session (Join)
	liveDown atomic.Int64 // unix nanoseconds since the live session is down; 0 while up
}

// NewEnv returns an Env with locking on.
func NewEnv(db *DB, locks *lockcore.Service, rec Recorder, proc string) *Env {
	e := &Env{DB: db, Locks: locks, Rec: rec, Proc: proc, horizon: defaultSectionHorizon}
	e.locking.Store(true)
	e.timing.Store(&Timing{})
	e.lockTimeout.Store(int64(lockcore.DefaultWait))
	e.since.Store(&time.Time{})
	return e
}

// Begin starts a run: from now on the checks judge only what is written
// from now on (by any process), so a run on a schema that an earlier run
// without locks damaged (a counter set back, a subject claimed twice)
// inherits none of its violations, and each run of a simulator is judged
// on its own work. It reads the server's clock, which stamps the rows.
func (e *Env) Begin(ctx context.Context) error {
	var now time.Time
	if err := e.DB.Get(ctx, "SELECT clock_timestamp()", nil, &now); err != nil {
		return fmt.Errorf("workers: starting a run: %w", err)
	}
	e.since.Store(&now)
	return nil
}

// Since returns when the current run began (Begin), on the server's clock;
// the zero time before the first Begin (every row counts).
func (e *Env) Since() time.Time { return *e.since.Load() }

// SetLocking turns every lock of the workloads on or off: advisory locks,
// the summariser's row lock and the config editor's flock.
func (e *Env) SetLocking(on bool) { e.locking.Store(on) }

// ToggleLocking turns the locks off if they are on and on if they are off,
// in one step (two toggles at once leave them as they were), and returns
// the new state.
func (e *Env) ToggleLocking() bool {
	for {
		on := e.locking.Load()
		if e.locking.CompareAndSwap(on, !on) {
			return !on
		}
	}
}

// Locking reports whether locks are on.
func (e *Env) Locking() bool { return e.locking.Load() }

// SetTiming replaces the timing.
func (e *Env) SetTiming(t Timing) { e.timing.Store(&t) }

// Timing returns the current timing.
func (e *Env) Timing() Timing { return *e.timing.Load() }

// SetLockTimeout sets the timeout of the blocking acquires (0: lockcore's
// default).
func (e *Env) SetLockTimeout(d time.Duration) {
	if d <= 0 {
		d = lockcore.DefaultWait
	}
	e.lockTimeout.Store(int64(d))
}

// LockTimeout returns the timeout of the blocking acquires.
func (e *Env) LockTimeout() time.Duration { return time.Duration(e.lockTimeout.Load()) }

// at calls the test hook for p, if any.
func (e *Env) at(ctx context.Context, p Point, agent int32) {
	if e.Hooks != nil && e.Hooks.At != nil {
		e.Hooks.At(ctx, p, agent)
	}
}

// sleep waits about d (uniform jitter of plus or minus half) or until ctx
// ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return Pause(ctx, d/2+rand.N(d+1))
}

// Pause waits d, or until ctx ends and then returns ctx's error.
func Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Env) spawn(kind Kind, fn func(ctx context.Context)) {
	if e.Spawn != nil {
		e.Spawn(kind, fn)
	}
}
