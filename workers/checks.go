package workers

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// readCounter reads one of agent's read-modify-write counters.
func (e *Env) readCounter(ctx context.Context, agent int32, field string) (int64, error) {
	var v int64
	err := e.DB.Get(ctx, "SELECT value FROM counters WHERE agent_id = $1 AND field = $2", []any{agent, field}, &v)
	if err != nil {
		return 0, fmt.Errorf("reading %s of agent %d: %w", field, agent, err)
	}
	return v, nil
}

// counterSQL writes a counter and logs the value, returning how often the
// value was logged before in this run ($6: Env.Since). The first repeat is
// marked reported, so that Audit does not report it again.
const counterSQL = `
	WITH b AS (SELECT count(*) AS n FROM rmw_log WHERE agent_id = $1 AND field = $2 AND after = $3 AND at >= $6),
	     u AS (UPDATE counters SET value = $3 WHERE agent_id = $1 AND field = $2),
	     l AS (INSERT INTO rmw_log (agent_id, field, after, worker, proc, reported) SELECT $1, $2, $3, $4, $5, n = 1 FROM b)
	SELECT n FROM b`

// writeCounter writes a counter read earlier and logs the value. A value
// already in the log (since the run began) means another read-modify-write
// read the same value and wrote the same result: one of the two updates is
// lost. Only values logged in this run count: a counter that an earlier run
// without locks set back would otherwise repeat that run's values.
func (e *Env) writeCounter(ctx context.Context, kind Kind, agent int32, field string, v int64) error {
	var seen int64
	err := e.write(ctx, agent, counterSQL, e.counterArgs(kind, agent, field, v), &seen)
	return e.counterWritten(kind, agent, field, v, seen, err)
}

// writeCounterTx is writeCounter inside tx.
func (e *Env) writeCounterTx(ctx context.Context, tx pgx.Tx, kind Kind, agent int32, field string, v int64) error {
	var seen int64
	err := tx.QueryRow(ctx, counterSQL, e.counterArgs(kind, agent, field, v)...).Scan(&seen)
	return e.counterWritten(kind, agent, field, v, seen, err)
}

func (e *Env) counterArgs(kind Kind, agent int32, field string, v int64) []any {
	return []any{agent, field, v, string(kind), e.Proc, e.Since()}
}

// counterWritten reports the first repeat of a value.
func (e *Env) counterWritten(kind Kind, agent int32, field string, v, seen int64, err error) error {
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

// claimTx records, inside tx, that kind did a once-only thing (ck) to
// subject; a claim already there (in this run) breaks the invariant. The
// claim goes in the transaction of the thing's own write, so a claim is
// never left without its effect (a server restart between the two would
// otherwise make the next, legitimate claim look like a second one). It is
// seen by other transactions at once: a second claim on subject waits for
// tx to end (claim_counts' key), then counts it.
func (e *Env) claimTx(ctx context.Context, tx pgx.Tx, kind Kind, ck, subject, what string) error {
	var n int64
	err := tx.QueryRow(ctx, claimSQL, ck, subject, string(kind), e.Proc, e.Since()).Scan(&n)
	return e.claimed(kind, ck, subject, what, n, err)
}

// claimSQL numbers the claim on its subject and logs it with its number;
// the number comes from claim_counts, whose key serialises the claims on
// one subject even across open transactions. A subject last claimed before
// the run began ($5: Env.Since) starts again at 1.
const claimSQL = `
	WITH c AS (
		INSERT INTO claim_counts AS cc (kind, subject, n, at) VALUES ($1, $2, 1, clock_timestamp())
		ON CONFLICT (kind, subject) DO UPDATE SET n = CASE WHEN cc.at >= $5 THEN cc.n + 1 ELSE 1 END, at = clock_timestamp()
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
