package workers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// cleanupTimeout bounds the bookkeeping that runs after a section, on a
// fresh context: long enough to ride out a server restart.
const cleanupTimeout = 5 * time.Second

// stopExitTimeout bounds a section's exit when its work was cancelled
// (the run is stopping): a row it cannot delete by then is deleted by the
// audit, if the server answers.
const stopExitTimeout = time.Second

// section is one critical section of an agent as it runs: its row in the
// sections table and the lock it runs under. Its fenced writes (see write)
// count here, for the Loss a lost section reports.
type section struct {
	id    int64
	agent int32
	fence int64  // the lock's fence; 0: unfenced (locks off, or fencing off)
	pid   uint32 // the lock's backend; 0: no lock

	writes  atomic.Int64 // fenced writes accepted
	refused atomic.Int64 // fenced writes (or the entry) refused: a newer grant had entered
	stopped atomic.Bool  // the body ended because the loss of its lock cancelled it
}

// loss describes the section as lost.
func (s *section) loss() *Loss {
	return &Loss{Fence: s.fence, PID: s.pid, Writes: s.writes.Load(), Refused: s.refused.Load(), Stopped: s.stopped.Load()}
}

// withAgent runs body as a critical section of agent: under the AGENT lock
// taken with a blocking acquire, or at once when locking is off. It records
// the attempt and its outcome, and returns the lock's or the body's error.
func (e *Env) withAgent(ctx context.Context, kind Kind, route string, agent int32, body func(context.Context) error) (ran bool, err error) {
	return e.section(ctx, kind, route, agent, false, e.LockTimeout(), body)
}

// tryAgent is withAgent with a try-lock: when another session holds the
// agent, body does not run and ran is false, with a nil error.
func (e *Env) tryAgent(ctx context.Context, kind Kind, agent int32, body func(context.Context) error) (ran bool, err error) {
	return e.section(ctx, kind, "", agent, true, 0, body)
}

func (e *Env) section(ctx context.Context, kind Kind, route string, agent int32, try bool, timeout time.Duration, body func(context.Context) error) (ran bool, err error) {
	key := lockcore.Pair(registry.SpaceAgent, agent)
	start := time.Now()
	var sec *section
	inner := func(ctx context.Context) error {
		ran = true
		e.Rec.Attempt(Attempt{Kind: kind, Route: route, Key: key, Outcome: model.OutcomeAcquired, Wait: time.Since(start)})
		sec = &section{agent: agent}
		return e.runSection(ctx, kind, sec, body)
	}
	switch {
	case !e.Locking():
		err = inner(ctx)
	case try:
		if lockcore.Holds(ctx, key) {
			e.Rec.Attempt(Attempt{Kind: kind, Route: route, Key: key, Outcome: model.OutcomeReentrant})
			return false, nil
		}
		var ok bool
		ok, err = e.Locks.TryWith(ctx, key, inner)
		if !ok && err == nil {
			e.Rec.Attempt(Attempt{Kind: kind, Route: route, Key: key, Outcome: model.OutcomeSkipped, Wait: time.Since(start)})
			return false, nil
		}
	default:
		err = e.Locks.With(ctx, key, inner, lockcore.Wait(timeout))
	}
	if err != nil {
		a := Attempt{Kind: kind, Route: route, Key: key, Outcome: classify(ctx, err), Wait: time.Since(start), Err: err, Body: ran}
		if a.Outcome == model.OutcomeLost && sec != nil {
			a.Loss = sec.loss()
		}
		e.Rec.Attempt(a)
	}
	return ran, err
}

// fenceOf is where a section takes its lock's fence (a test may mint its
// own, to test the storage side of fencing).
var fenceOf = lockcore.FenceOf

// sectionOf is the context key that marks a body as inside a critical
// section of an agent, locked or not; its value is the *section.
type sectionOf struct{ agent int32 }

// inSection reports whether ctx is inside a critical section of agent:
// work that ctx's holder does inline then belongs to that section, with
// locking on or off.
func inSection(ctx context.Context, agent int32) bool { return sectionIn(ctx, agent) != nil }

// sectionIn returns the section of agent that ctx is inside, or nil.
func sectionIn(ctx context.Context, agent int32) *section {
	s, _ := ctx.Value(sectionOf{agent}).(*section)
	return s
}

// runSection registers the section (the overlap check, and the fence
// raise), applies any pending fault to a hook's section, runs body, and
// deregisters the section. ctx is the lock's body context: it carries the
// lock's pid and fence, and is cancelled with cause lockcore.ErrLost when
// the lock is lost.
func (e *Env) runSection(ctx context.Context, kind Kind, sec *section, body func(context.Context) error) (err error) {
	key := lockcore.Pair(registry.SpaceAgent, sec.agent)
	if pid, ok := lockcore.HolderPID(ctx, key); ok {
		sec.pid = pid
		sec.fence, _ = fenceOf(ctx, key)
	}
	defer func() {
		// A body that failed because its lock was lost says so, whatever
		// statement noticed it first.
		if cause := context.Cause(ctx); err != nil && errors.Is(cause, lockcore.ErrLost) {
			sec.stopped.Store(true)
			if !errors.Is(err, lockcore.ErrLost) {
				err = fmt.Errorf("%w: %w", err, cause)
			}
		}
	}()
	err = e.enter(ctx, kind, sec)
	if sec.id != 0 {
		defer func() {
			e.exit(ctx, sec.id)
			if err == nil {
				e.Rec.Section(kind)
			}
		}()
	}
	if err != nil {
		return err
	}
	ctx = context.WithValue(ctx, sectionOf{sec.agent}, sec)
	e.at(ctx, PointEntered, sec.agent)
	if kind == KindHook {
		if err := e.fault(ctx, sec); err != nil {
			return err
		}
	}
	return body(ctx)
}

// enter registers sec, raises the agent's fence to sec's, and reports an
// overlap if another live section of the agent is inside. A section found
// registered whose lock was lost is no overlap: it is noted, and its fenced
// writes are refused from now on. If sec's own lock turns out lost (its
// fence is older than the agent's) enter returns an error wrapping
// ErrFenced: the section must not write.
func (e *Env) enter(ctx context.Context, kind Kind, sec *section) error {
	var others int64
	var who, lostWho string
	var stale bool
	var pid *int32
	if sec.pid != 0 {
		p := int32(sec.pid)
		pid = &p
	}
	horizon := strconv.FormatInt(e.horizon.Milliseconds(), 10) + " milliseconds"
	// Not cancelled with the body: a statement cut short by a lost lock
	// may still have registered the section, and a row whose id we never
	// learnt could not be removed. One statement, bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := e.DB.Get(ctx, "SELECT section_id, others, who, lost_who, stale FROM enter_section($1, $2, $3, $4::interval, $5, $6, $7)",
		[]any{sec.agent, string(kind), e.Proc, horizon, registry.SpaceAgent, pid, sec.fence},
		&sec.id, &others, &who, &lostWho, &stale)
	if err != nil {
		return fmt.Errorf("entering section of agent %d: %w", sec.agent, err)
	}
	key := lockcore.Pair(registry.SpaceAgent, sec.agent)
	if lostWho != "" {
		guard := "its writes are refused by the fence"
		if sec.fence == 0 {
			guard = "nothing refuses its writes (unfenced)"
		}
		e.Rec.Note(kind, key, fmt.Sprintf("%s entered while a section whose lock was lost ran on (%s): a lost holder, not an overlap; %s",
			kind, lostWho, guard))
	}
	if stale {
		sec.refused.Add(1)
		return fmt.Errorf("%w: %s on AGENT %d entered after its lock was lost (fence %d)", ErrFenced, kind, sec.agent, sec.fence)
	}
	if others > 0 {
		e.Rec.Violation(InvNoOverlap, "section:"+strconv.FormatInt(sec.id, 10),
			fmt.Sprintf("AGENT %d: %s entered while %d other section(s) were inside (%s)", sec.agent, kind, others, who))
	}
	return nil
}

// exit deregisters a section, on a fresh context so that a cancelled body
// leaves nothing behind, and retries on a fresh connection: after a server
// restart the first pooled connection is dead. A row it still cannot
// delete (the server is down) is kept in a list and deleted by a later
// exit or the audit; until then enter_section does not count it (it is
// older than the server's start, or its lock is gone).
func (e *Env) exit(ctx context.Context, id int64) {
	bound := cleanupTimeout
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), lockcore.ErrLost) {
		bound = stopExitTimeout // the work is being abandoned: do not hold the stop up
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	ids := append(e.unexited.list(), id)
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		if _, err := e.DB.Exec(cctx, "DELETE FROM sections WHERE id = ANY ($1)", ids); err == nil {
			e.unexited.remove(ids)
			return
		}
		if Pause(cctx, backoff) != nil {
			e.unexited.add(id)
			return
		}
	}
}

// idSet is a set of section ids, safe for concurrent use.
type idSet struct {
	mu sync.Mutex
	m  map[int64]struct{}
}

func (s *idSet) add(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int64]struct{}{}
	}
	s.m[id] = struct{}{}
}

func (s *idSet) remove(ids []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.m, id)
	}
}

func (s *idSet) has(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	return ok
}

func (s *idSet) list() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int64, 0, len(s.m))
	for id := range s.m {
		out = append(out, id)
	}
	return out
}

// fault applies one pending fault to a hook's section, if any is armed. It
// runs when the section has entered, before the body's work, so a killed
// holder is lost in the middle of its section.
func (e *Env) fault(ctx context.Context, sec *section) error {
	key := lockcore.Pair(registry.SpaceAgent, sec.agent)
	switch {
	case take(&e.Faults.reentrant):
		// A nested acquire of the key this body holds: lockcore refuses it
		// at once instead of deadlocking against our own connection.
		start := time.Now()
		err := e.Locks.With(ctx, key, func(context.Context) error { return nil })
		out := classify(ctx, err)
		if err == nil {
			out = model.OutcomeAcquired // only possible with locking off: nothing was held
		}
		e.Rec.Attempt(Attempt{Kind: KindHook, Route: "nested", Key: key, Outcome: out, Wait: time.Since(start), Err: err})
		return nil
	case take(&e.Faults.slowBody):
		d := e.Timing().SlowBody
		if d <= 0 {
			d = e.LockTimeout() + e.LockTimeout()/2
		}
		e.Rec.Note(KindHook, key, fmt.Sprintf("slow body: holding the lock %s more", d.Round(time.Millisecond)))
		return Pause(ctx, d) // no jitter: it must outlast the timeout
	case take(&e.Faults.killHolder):
		return e.killHolder(ctx, key)
	}
	return nil
}

// lossWait bounds how long the kill-holder fault waits for lockcore to
// report the loss of the lock it killed.
const lossWait = time.Second

// killHolder terminates the backend whose session holds key, from inside
// the section, waits until it is gone and then (up to lossWait) until the
// lock's loss cancels the body's context, as lockcore does when it sees
// the backend die: the section then ends at once, before its work. A
// lockcore that does not report the loss leaves the body to go on as if
// nothing had happened, as a holder that does not watch its lock would; a
// waiter is granted the key meanwhile, and its fence refuses whatever
// write of this body comes after it entered.
func (e *Env) killHolder(ctx context.Context, key lockcore.Key) error {
	pid, ok := lockcore.HolderPID(ctx, key)
	if !ok {
		e.Rec.Note(KindHook, key, "kill-holder: no lock held (locking is off); nothing to kill")
		return nil
	}
	e.Rec.Note(KindHook, key, fmt.Sprintf("kill-holder: terminating backend %d, which holds %s", pid, key))
	var done bool
	if err := e.DB.Get(ctx, "SELECT pg_terminate_backend($1::int4)", []any{int32(pid)}, &done); err != nil {
		return err
	}
	deadline := time.Now().Add(cleanupTimeout)
	for {
		var n int
		if err := e.DB.Get(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int4", []any{int32(pid)}, &n); err != nil {
			return err
		}
		if n == 0 || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	t := time.NewTimer(lossWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
