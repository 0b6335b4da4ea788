package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Audit checks, over the database, everything this process did (the rows
// tagged with its Proc), and reports each violation to the Recorder with the
// same subject a live detection would have used:
//
//   - each of its transcript events is in the ledger exactly once;
//   - no counter value it wrote was written twice (a lost update);
//   - no subject it claimed (summary call, skill injection, completion,
//     handoff, remote send) was claimed twice;
//   - none of its sections is still registered;
//   - every config key it saved is in the config file.
//
// Run it once the workloads have stopped, after Drain.
func (e *Env) Audit(ctx context.Context) error {
	var errs []error

	type eventCount struct {
		Event string
		Agent int32
		N     int64
	}
	evs, err := Query(ctx, e.DB, `SELECT t.event_id, t.agent_id, count(l.id) FROM transcript t
		LEFT JOIN ledger l ON l.event_id = t.event_id
		WHERE t.proc = $1 GROUP BY t.event_id, t.agent_id HAVING count(l.id) <> 1`, []any{e.Proc},
		pgx.RowToStructByPos[eventCount])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of events: %w", err))
	}
	for _, ev := range evs {
		e.Rec.Violation(InvExactlyOnce, "event:"+ev.Event,
			fmt.Sprintf("AGENT %d: event %s applied %d times", ev.Agent, ev.Event, ev.N))
	}

	type dupValue struct {
		Agent int32
		Field string
		After int64
		N     int64
	}
	dups, err := Query(ctx, e.DB, `WITH mine AS (SELECT DISTINCT agent_id, field, after FROM rmw_log WHERE proc = $1)
		SELECT r.agent_id, r.field, r.after, count(*) FROM rmw_log r JOIN mine USING (agent_id, field, after)
		GROUP BY r.agent_id, r.field, r.after HAVING count(*) > 1`, []any{e.Proc}, pgx.RowToStructByPos[dupValue])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of counters: %w", err))
	}
	for _, d := range dups {
		e.Rec.Violation(InvNoLostUpdate, counterSubject(d.Agent, d.Field, d.After),
			fmt.Sprintf("AGENT %d: %s=%d written %d times: concurrent updates were lost", d.Agent, d.Field, d.After, d.N))
	}

	type dupClaim struct {
		Kind    string
		Subject string
		N       int64
	}
	claims, err := Query(ctx, e.DB, `WITH mine AS (SELECT DISTINCT kind, subject FROM claims WHERE proc = $1)
		SELECT c.kind, c.subject, count(*) FROM claims c JOIN mine USING (kind, subject)
		GROUP BY c.kind, c.subject HAVING count(*) > 1`, []any{e.Proc}, pgx.RowToStructByPos[dupClaim])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of claims: %w", err))
	}
	for _, c := range claims {
		e.Rec.Violation(claimInvariant[c.Kind], c.Kind+":"+c.Subject, fmt.Sprintf("%s: %s done %d times", c.Subject, c.Kind, c.N))
	}

	var left int64
	if err := e.DB.Get(ctx, "SELECT count(*) FROM sections WHERE proc = $1", []any{e.Proc}, &left); err != nil {
		errs = append(errs, fmt.Errorf("audit of sections: %w", err))
	} else if left > 0 {
		e.Rec.Violation(InvNoLeaks, "sections", fmt.Sprintf("%d critical section(s) still registered after the run", left))
	}

	if err := e.auditConfig(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AuditConfig checks the config file alone; it is cheap enough to run while
// the workloads run (a lost key stays lost).
func (e *Env) AuditConfig() error { return e.auditConfig() }
