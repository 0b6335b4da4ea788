package sim

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// queuedWait is the wait above which an acquire shows in the event stream
// as "acquired after a wait".
const queuedWait = 20 * time.Millisecond

type kindCounters struct {
	attempts, acquired, skipped, timeouts, reentrant, errors, lost atomic.Int64
}

func (c *kindCounters) load() model.Counters {
	return model.Counters{
		Attempts: c.attempts.Load(), Acquired: c.acquired.Load(), Skipped: c.skipped.Load(),
		Timeouts: c.timeouts.Load(), Reentrant: c.reentrant.Load(), Errors: c.errors.Load(), Lost: c.lost.Load(),
	}
}

func (c *kindCounters) reset() {
	for _, n := range []*atomic.Int64{&c.attempts, &c.acquired, &c.skipped, &c.timeouts, &c.reentrant, &c.errors, &c.lost} {
		n.Store(0)
	}
}

// lossCounters count the critical sections whose lock was lost, by how
// they ended (see workers.Loss).
type lossCounters struct {
	sections, refused, stopped, finished, unfenced, writesRefused atomic.Int64
}

func (l *lossCounters) add(loss *workers.Loss) {
	l.sections.Add(1)
	switch {
	case loss.Refused > 0:
		l.refused.Add(1)
	case loss.Stopped:
		l.stopped.Add(1)
	default:
		l.finished.Add(1)
	}
	if loss.Fence == 0 {
		l.unfenced.Add(1)
	}
	l.writesRefused.Add(loss.Refused)
}

func (l *lossCounters) load() LossStats {
	return LossStats{
		Sections: l.sections.Load(), Refused: l.refused.Load(), Stopped: l.stopped.Load(),
		Finished: l.finished.Load(), Unfenced: l.unfenced.Load(), WritesRefused: l.writesRefused.Load(),
	}
}

func (l *lossCounters) reset() {
	for _, n := range []*atomic.Int64{&l.sections, &l.refused, &l.stopped, &l.finished, &l.unfenced, &l.writesRefused} {
		n.Store(0)
	}
}

type invState struct {
	n    atomic.Int64
	last atomic.Pointer[string]
}

// recorder is the simulator's workers.Recorder and lockcore observer: it
// counts per worker kind, keeps the wait histogram, counts invariant
// violations, tracks which backend holds which key, and feeds the event
// stream.
type recorder struct {
	kinds    map[workers.Kind]*kindCounters
	sections atomic.Int64
	hooks    atomic.Int64 // hook sections completed
	waits    histogram
	invs     map[workers.Invariant]*invState
	losses   lossCounters
	errs     errorTally

	events  chan model.Event
	dropped atomic.Int64

	orderMu    sync.Mutex
	inversions []lockcore.Inversion // this run's lock-order inversions, first occurrences

	heldMu sync.Mutex
	held   map[lockcore.Key]uint32 // key -> pid of this process's holder

	stopping atomic.Bool // cancellations are the run ending, not errors
	log      *slog.Logger

	shown atomic.Pointer[shown] // the kinds and invariants of the running systems
	// watchDeadlocks shows InvDeadlocks whatever the systems (Options.WatchDeadlocks).
	watchDeadlocks bool
}

// shown are the worker kinds and invariants a scenario's systems report.
type shown struct {
	kinds []workers.Kind
	invs  []workers.Invariant
}

// setSystems makes the counters and invariants those of sys.
func (r *recorder) setSystems(sys System) {
	var sh shown
	if sys&SystemAgents != 0 {
		sh.kinds = append(sh.kinds, workers.Kinds...)
		sh.invs = append(sh.invs, workers.Invariants...)
	}
	if sys&SystemTurns != 0 {
		sh.kinds = append(sh.kinds, workers.TurnKinds...)
		sh.invs = append(sh.invs, workers.TurnInvariants...)
	}
	if sys&SystemJobs != 0 {
		sh.kinds = append(sh.kinds, workers.JobKinds...)
		sh.invs = append(sh.invs, workers.JobInvariants...)
	}
	if sys&SystemDeadlocks != 0 || r.watchDeadlocks {
		sh.invs = append(sh.invs, InvDeadlocks)
	}
	if !slices.Contains(sh.invs, workers.InvNoLeaks) {
		sh.invs = append(sh.invs, workers.InvNoLeaks)
	}
	r.shown.Store(&sh)
}

func newRecorder(buffer int, log *slog.Logger) *recorder {
	r := &recorder{
		kinds:  map[workers.Kind]*kindCounters{},
		invs:   map[workers.Invariant]*invState{},
		events: make(chan model.Event, buffer),
		held:   map[lockcore.Key]uint32{},
		log:    log,
	}
	for _, k := range workers.AllKinds {
		r.kinds[k] = &kindCounters{}
	}
	for _, inv := range workers.AllInvariants {
		r.invs[inv] = &invState{}
	}
	r.invs[InvDeadlocks] = &invState{}
	r.setSystems(SystemAgents)
	return r
}

// Attempt implements workers.Recorder.
func (r *recorder) Attempt(a workers.Attempt) {
	c := r.kinds[a.Kind] // every kind workers defines has its counters
	if !a.Body {
		c.attempts.Add(1)
	}
	ev := model.Event{Worker: string(a.Kind), Outcome: a.Outcome, Key: label(a), Wait: a.Wait}
	if a.Route != "" {
		ev.Detail = a.Route
	}
	switch a.Outcome {
	case "":
		return // ran without a lock (the status route)
	case model.OutcomeAcquired:
		c.acquired.Add(1)
		r.waits.add(a.Wait)
		if a.Wait < queuedWait {
			return // only grants after a wait are worth a line; Wait says how long
		}
	case model.OutcomeSkipped:
		c.skipped.Add(1)
		if a.Key != (lockcore.Key{}) {
			if pid, ok := r.holder(a.Key); ok {
				ev.PID = int32(pid) // shown as model.PIDText says: "held by pid N"
			} else {
				ev.Detail = join(ev.Detail, "held by another session")
			}
		} else {
			ev.Detail = join(ev.Detail, "row locked by another transaction (55P03)")
		}
	case model.OutcomeTimeout:
		c.timeouts.Add(1)
	case model.OutcomeReentrant:
		c.reentrant.Add(1)
		ev.Detail = join(ev.Detail, "reentrant acquire refused: the key is held in this context")
	case model.OutcomeCanceled:
		if r.stopping.Load() {
			return
		}
		c.errors.Add(1)
		r.errs.add(a.Err)
		ev.Detail = join(ev.Detail, errLine(a.Err))
	case model.OutcomeLost:
		c.lost.Add(1)
		ev.Detail = join(ev.Detail, "lock lost while held")
		if a.Loss != nil {
			r.losses.add(a.Loss)
			ev.PID = int32(a.Loss.PID)
			ev.Detail = join(ev.Detail, lossLine(a.Loss))
			ev.Contained = a.Loss.Aborted()
		}
		r.log.Warn("lock lost", "worker", a.Kind, "key", ev.Key, "detail", ev.Detail, "err", a.Err)
	default:
		if r.stopping.Load() && a.Err != nil && strings.Contains(a.Err.Error(), "context canceled") {
			return
		}
		c.errors.Add(1)
		r.errs.add(a.Err)
		ev.Detail = join(ev.Detail, errLine(a.Err))
		r.log.Warn("worker error", "worker", a.Kind, "key", ev.Key, "err", a.Err)
	}
	r.emit(ev)
}

// Section implements workers.Recorder.
func (r *recorder) Section(k workers.Kind) {
	r.sections.Add(1)
	if k == workers.KindHook {
		r.hooks.Add(1)
	}
}

// Violation implements workers.Recorder. workers reports each broken
// subject once (the live checks mark what they report in the database, and
// the final audit skips it), so every report counts and nothing is kept per
// subject: a long run without locks breaks thousands.
func (r *recorder) Violation(inv workers.Invariant, subject, detail string) {
	st, ok := r.invs[inv]
	if !ok {
		return
	}
	st.n.Add(1)
	st.last.Store(&detail)
	r.log.Warn("invariant broken", "invariant", inv, "subject", subject, "detail", detail)
	r.emit(model.Event{Worker: "check", Outcome: model.OutcomeViolation, Detail: string(inv) + ": " + detail})
}

// Note implements workers.Recorder.
func (r *recorder) Note(k workers.Kind, key lockcore.Key, detail string) {
	r.emit(model.Event{Worker: string(k), Key: keyLabel(key), Detail: detail})
}

// observe is the lockcore observer: it tracks holders for skip events and
// reports phantom locks, which no worker sees.
func (r *recorder) observe(e lockcore.Event) {
	switch e.Kind {
	case lockcore.EventAcquired:
		r.heldMu.Lock()
		r.held[e.Key] = e.PID
		r.heldMu.Unlock()
	case lockcore.EventReleased, lockcore.EventLost:
		r.heldMu.Lock()
		if r.held[e.Key] == e.PID {
			delete(r.held, e.Key)
		}
		r.heldMu.Unlock()
	case lockcore.EventPhantom:
		r.emit(model.Event{Worker: "lockcore", Outcome: model.OutcomePhantom, Key: e.Key.String(), PID: int32(e.PID),
			Detail: "phantom lock cleaned: granted as its acquire failed (PostgreSQL bug #17686), unlocked"})
	}
}

func (r *recorder) holder(k lockcore.Key) (uint32, bool) {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	pid, ok := r.held[k]
	return pid, ok
}

func (r *recorder) emit(ev model.Event) {
	ev.Time = time.Now()
	select {
	case r.events <- ev:
	default:
		r.dropped.Add(1)
	}
}

func (r *recorder) counters() map[string]model.Counters {
	kinds := r.shown.Load().kinds
	out := make(map[string]model.Counters, len(kinds))
	for _, k := range kinds {
		out[string(k)] = r.kinds[k].load()
	}
	return out
}

func (r *recorder) invariants() []model.Invariant {
	invs := r.shown.Load().invs
	out := make([]model.Invariant, 0, len(invs))
	for _, inv := range invs {
		st := r.invs[inv]
		i := model.Invariant{Name: string(inv), Violations: st.n.Load()}
		if p := st.last.Load(); p != nil {
			i.Last = *p
		}
		out = append(out, i)
	}
	return out
}

// lossLine says how a lost section ended.
func lossLine(l *workers.Loss) string {
	var s string
	switch {
	case l.Refused > 0:
		s = "aborted: the fence refused its write (a newer holder had entered)"
	case l.Stopped:
		s = "aborted: it stopped at the loss, before writing again"
	default:
		s = "lost after its writes"
	}
	if l.Fence == 0 {
		return s + "; unfenced: nothing guarded its writes"
	}
	return s + "; fence " + strconv.FormatInt(l.Fence, 10)
}

// inversion records a lock-order inversion of the run (lockcore.Order
// reports each pair of classes once) and shows it in the event log.
func (r *recorder) inversion(v lockcore.Inversion) {
	r.orderMu.Lock()
	r.inversions = append(r.inversions, v)
	r.orderMu.Unlock()
	r.emit(model.Event{Worker: "lock order", Key: v.Name,
		Detail: fmt.Sprintf("%s taken at %s while holding %s: the reverse of the order seen at %s", v.To, v.Site, v.From, v.PathSite)})
}

// orderInversions returns the run's lock-order inversions.
func (r *recorder) orderInversions() []lockcore.Inversion {
	r.orderMu.Lock()
	defer r.orderMu.Unlock()
	return slices.Clone(r.inversions)
}

// reset zeroes the counters, the wait histogram and the invariant counts,
// for a new run (a scenario switch). The event stream goes on.
func (r *recorder) reset() {
	r.orderMu.Lock()
	r.inversions = nil
	r.orderMu.Unlock()
	for _, c := range r.kinds {
		c.reset()
	}
	r.sections.Store(0)
	r.hooks.Store(0)
	r.waits.reset()
	for _, st := range r.invs {
		st.n.Store(0)
		st.last.Store(nil)
	}
	r.losses.reset()
	r.errs.reset()
}

func label(a workers.Attempt) string {
	if a.Label != "" {
		return a.Label
	}
	return keyLabel(a.Key)
}

func keyLabel(k lockcore.Key) string {
	if k == (lockcore.Key{}) {
		return ""
	}
	return k.String()
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + ": " + b
}

func errLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// histogram counts durations in log-spaced buckets, eight per doubling
// (about 9% wide), from 1µs to about 4.6 hours; safe for concurrent use.
type histogram struct {
	buckets [8 * 34]atomic.Int64
	count   atomic.Int64
	max     atomic.Int64
}

func bucketOf(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us <= 1 {
		return 0
	}
	i := int(math.Ceil(8 * math.Log2(us)))
	return min(i, 8*34-1)
}

func bucketUpper(i int) time.Duration {
	return time.Duration(math.Exp2(float64(i)/8) * float64(time.Microsecond))
}

func (h *histogram) reset() {
	for i := range h.buckets {
		h.buckets[i].Store(0)
	}
	h.count.Store(0)
	h.max.Store(0)
}

func (h *histogram) add(d time.Duration) {
	h.buckets[bucketOf(d)].Add(1)
	h.count.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantile returns the upper bound of the bucket holding the q-quantile
// (never above the maximum seen).
func (h *histogram) quantile(q float64) time.Duration {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	var seen int64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen >= rank {
			return min(bucketUpper(i), time.Duration(h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}
