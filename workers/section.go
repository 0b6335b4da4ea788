package workers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// cleanupTimeout bounds the bookkeeping that runs after a section, on a
// fresh context.
const cleanupTimeout = 5 * time.Second

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
	key := lockcore.AgentKey(agent)
	start := time.Now()
	inner := func(ctx context.Context) error {
		ran = true
		e.Rec.Attempt(Attempt{Kind: kind, Route: route, Key: key, Outcome: model.OutcomeAcquired, Wait: time.Since(start)})
		return e.runSection(ctx, kind, agent, body)
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
		err = e.Locks.WithTimeout(ctx, key, timeout, inner)
	}
	if err != nil {
		e.Rec.Attempt(Attempt{Kind: kind, Route: route, Key: key, Outcome: classify(ctx, err), Wait: time.Since(start), Err: err, Body: ran})
	}
	return ran, err
}

// classify turns a workload's error into an outcome.
func classify(ctx context.Context, err error) model.Outcome {
	switch {
	case errors.Is(err, lockcore.ErrTimeout):
		return model.OutcomeTimeout
	case errors.Is(err, lockcore.ErrReentrant):
		return model.OutcomeReentrant
	case errors.Is(err, lockcore.ErrLost):
		return model.OutcomeLost
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return model.OutcomeCanceled
	}
	return model.OutcomeError
}

// sectionOf is the context key that marks a body as inside a critical
// section of an agent, locked or not.
type sectionOf struct{ agent int32 }

// inSection reports whether ctx is inside a critical section of agent:
// work that ctx's holder does inline then belongs to that section, with
// locking on or off.
func inSection(ctx context.Context, agent int32) bool { return ctx.Value(sectionOf{agent}) != nil }

// runSection registers the section (the overlap check), runs body, applies
// any pending fault to a hook's section, and deregisters it.
func (e *Env) runSection(ctx context.Context, kind Kind, agent int32, body func(context.Context) error) (err error) {
	id, err := e.enter(ctx, kind, agent)
	if err != nil {
		return err
	}
	ctx = context.WithValue(ctx, sectionOf{agent}, true)
	defer func() {
		e.exit(ctx, id)
		if err == nil {
			e.Rec.Section(kind)
		}
	}()
	e.at(ctx, PointEntered, agent)
	if err := body(ctx); err != nil {
		return err
	}
	if kind == KindHook {
		return e.fault(ctx, agent, id)
	}
	return nil
}

// enter registers a section of agent and reports an overlap if another
// section of the agent is inside.
func (e *Env) enter(ctx context.Context, kind Kind, agent int32) (int64, error) {
	var id, others int64
	var who string
	horizon := strconv.FormatInt(e.horizon.Milliseconds(), 10) + " milliseconds"
	err := e.DB.Get(ctx, "SELECT section_id, others, who FROM enter_section($1, $2, $3, $4::interval)",
		[]any{agent, string(kind), e.Proc, horizon}, &id, &others, &who)
	if err != nil {
		return 0, fmt.Errorf("entering section of agent %d: %w", agent, err)
	}
	if others > 0 {
		e.Rec.Violation(InvNoOverlap, "section:"+strconv.FormatInt(id, 10),
			fmt.Sprintf("AGENT %d: %s entered while %d other section(s) were inside (%s)", agent, kind, others, who))
	}
	return id, nil
}

// exit deregisters a section, on a fresh context so that a cancelled body
// leaves nothing behind.
func (e *Env) exit(ctx context.Context, id int64) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = e.DB.Exec(cctx, "DELETE FROM sections WHERE id = $1", id) // a failure shows in Audit as a section left behind
}

// fault applies one pending fault to a hook's section, if any is armed.
func (e *Env) fault(ctx context.Context, agent int32, section int64) error {
	key := lockcore.AgentKey(agent)
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
		return e.killHolder(ctx, key, section)
	}
	return nil
}

// killHolder terminates the backend whose session holds key, from inside
// the section, and waits until it is gone. The section is marked lost
// first: a killed holder no longer guarantees exclusion (that is what
// lockcore.ErrLost says), so a successor entering now is not an overlap.
// The body then returns; the release finds the lock lost.
func (e *Env) killHolder(ctx context.Context, key lockcore.Key, section int64) error {
	pid, ok := lockcore.HolderPID(ctx, key)
	if !ok {
		e.Rec.Note(KindHook, key, "kill-holder: no lock held (locking is off); nothing to kill")
		return nil
	}
	if _, err := e.DB.Exec(ctx, "UPDATE sections SET lost = true WHERE id = $1", section); err != nil {
		return err
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
			return nil
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// readCounter reads one of agent's read-modify-write counters.
func (e *Env) readCounter(ctx context.Context, agent int32, field string) (int64, error) {
	var v int64
	err := e.DB.Get(ctx, "SELECT value FROM counters WHERE agent_id = $1 AND field = $2", []any{agent, field}, &v)
	if err != nil {
		return 0, fmt.Errorf("reading %s of agent %d: %w", field, agent, err)
	}
	return v, nil
}

// writeCounter writes a counter read earlier and logs the value. A value
// already in the log means another read-modify-write read the same value
// and wrote the same result: one of the two updates is lost. The first
// repeat of a value is reported, and its log row marked so that Audit does
// not report it again.
func (e *Env) writeCounter(ctx context.Context, kind Kind, agent int32, field string, v int64) error {
	var seen int64
	err := e.DB.Get(ctx, `
		WITH b AS (SELECT count(*) AS n FROM rmw_log WHERE agent_id = $1 AND field = $2 AND after = $3),
		     u AS (UPDATE counters SET value = $3 WHERE agent_id = $1 AND field = $2),
		     l AS (INSERT INTO rmw_log (agent_id, field, after, worker, proc, reported) SELECT $1, $2, $3, $4, $5, n = 1 FROM b)
		SELECT n FROM b`,
		[]any{agent, field, v, string(kind), e.Proc}, &seen)
	if err != nil {
		return fmt.Errorf("writing %s of agent %d: %w", field, agent, err)
	}
	if seen == 1 {
		e.Rec.Violation(InvNoLostUpdate, counterSubject(agent, field, v),
			fmt.Sprintf("AGENT %d: %s wrote %s=%d, a value already written: a concurrent update was lost", agent, kind, field, v))
	}
	return nil
}

func counterSubject(agent int32, field string, v int64) string {
	return fmt.Sprintf("counter:%d/%s/%d", agent, field, v)
}

// bump is a read-modify-write of one counter with a pause in between, as
// the seed's ORM code does (load, change the attribute, commit later).
func (e *Env) bump(ctx context.Context, kind Kind, agent int32, field string) (int64, error) {
	v, err := e.readCounter(ctx, agent, field)
	if err != nil {
		return 0, err
	}
	e.at(ctx, PointCounterRead, agent)
	if err := sleep(ctx, e.Timing().Step); err != nil {
		return 0, err
	}
	return v + 1, e.writeCounter(ctx, kind, agent, field, v+1)
}

// claim records that kind did a once-only thing (ck) to subject. A claim
// already there breaks the invariant.
func (e *Env) claim(ctx context.Context, kind Kind, ck, subject, what string) error {
	var n int64
	err := e.DB.Get(ctx, claimSQL, []any{ck, subject, string(kind), e.Proc}, &n)
	return e.claimed(kind, ck, subject, what, n, err)
}

// claimTx is claim inside tx, for a workload that already holds a
// connection: taking a second one from the pool while holding the first
// could exhaust it. The claim is seen by other transactions at once: a
// second claim on subject waits for tx to end (claim_counts' key), then
// counts it.
func (e *Env) claimTx(ctx context.Context, tx pgx.Tx, kind Kind, ck, subject, what string) error {
	var n int64
	err := tx.QueryRow(ctx, claimSQL, ck, subject, string(kind), e.Proc).Scan(&n)
	return e.claimed(kind, ck, subject, what, n, err)
}

// claimSQL numbers the claim on its subject and logs it with its number;
// the number comes from claim_counts, whose key serialises the claims on
// one subject even across open transactions.
const claimSQL = `
	WITH c AS (
		INSERT INTO claim_counts AS cc (kind, subject, n) VALUES ($1, $2, 1)
		ON CONFLICT (kind, subject) DO UPDATE SET n = cc.n + 1
		RETURNING n)
	INSERT INTO claims (kind, subject, worker, proc, n) SELECT $1, $2, $3, $4, n FROM c
	RETURNING n`

// claimed reports the second claim on a subject (later ones are the same
// broken subject); Audit skips subjects with a second claim.
func (e *Env) claimed(kind Kind, ck, subject, what string, n int64, err error) error {
	if err != nil {
		return fmt.Errorf("recording %s %s: %w", ck, subject, err)
	}
	if n == 2 {
		e.Rec.Violation(claimInvariant[ck], ck+":"+subject, fmt.Sprintf("%s: %s done twice (%s)", subject, ck, what))
	}
	return nil
}

// keySet is a set of strings safe for concurrent use.
type keySet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

// add adds k and reports whether it was new.
func (s *keySet) add(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]struct{}{}
	}
	if _, ok := s.m[k]; ok {
		return false
	}
	s.m[k] = struct{}{}
	return true
}
