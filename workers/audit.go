package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Audit checks, over the database, everything this process did in the
// current run (the rows tagged with its Proc, written since Begin), and
// reports each violation the live checks did not report (they mark what
// they report in the database):
//
//   - each of its transcript events is in the ledger exactly once;
//   - no counter value it wrote was written twice (a lost update);
//   - no subject it claimed (summary call, skill injection, completion,
//     handoff, remote send) was claimed twice;
//   - none of its sections is still registered (those left are removed;
//     they are reported unless their exit ran and could not reach the
//     server, as after a restart);
//   - every config key it saved is in the config file.
//
// Run it once the workloads have stopped, after Drain. A second Audit does
// not report again what the first did.
func (e *Env) Audit(ctx context.Context) error {
	var errs []error
	report := func(inv Invariant, subject, detail string) {
		if e.audited.add(string(inv) + "\x00" + subject) {
			e.Rec.Violation(inv, subject, detail)
		}
	}

	type eventCount struct {
		Event string
		Agent int32
		N     int64
	}
	evs, err := Query(ctx, e.DB, `SELECT t.event_id, t.agent_id, count(l.id) FROM transcript t
		LEFT JOIN ledger l ON l.event_id = t.event_id
		WHERE t.proc = $1 AND t.at >= $2 GROUP BY t.event_id, t.agent_id
		HAVING count(l.id) <> 1 AND NOT coalesce(bool_or(l.reported), false)`, []any{e.Proc, e.Since()},
		pgx.RowToStructByPos[eventCount])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of events: %w", err))
	}
	for _, ev := range evs {
		report(InvExactlyOnce, "event:"+ev.Event, fmt.Sprintf("AGENT %d: event %s applied %d times", ev.Agent, ev.Event, ev.N))
	}

	type dupValue struct {
		Agent int32
		Field string
		After int64
		N     int64
	}
	dups, err := Query(ctx, e.DB, `WITH mine AS (SELECT DISTINCT agent_id, field, after FROM rmw_log WHERE proc = $1 AND at >= $2)
		SELECT r.agent_id, r.field, r.after, count(*) FROM rmw_log r JOIN mine USING (agent_id, field, after)
		WHERE r.at >= $2
		GROUP BY r.agent_id, r.field, r.after HAVING count(*) > 1 AND NOT bool_or(r.reported)`,
		[]any{e.Proc, e.Since()}, pgx.RowToStructByPos[dupValue])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of counters: %w", err))
	}
	for _, d := range dups {
		report(InvNoLostUpdate, counterSubject(d.Agent, d.Field, d.After),
			fmt.Sprintf("AGENT %d: %s=%d written %d times: concurrent updates were lost", d.Agent, d.Field, d.After, d.N))
	}

	type dupClaim struct {
		Kind    string
		Subject string
		N       int64
	}
	claims, err := Query(ctx, e.DB, `WITH mine AS (SELECT DISTINCT kind, subject FROM claims WHERE proc = $1 AND at >= $2)
		SELECT c.kind, c.subject, count(*) FROM claims c JOIN mine USING (kind, subject)
		WHERE c.at >= $2
		GROUP BY c.kind, c.subject HAVING count(*) > 1 AND NOT bool_or(c.n = 2)`,
		[]any{e.Proc, e.Since()}, pgx.RowToStructByPos[dupClaim])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of claims: %w", err))
	}
	for _, c := range claims {
		report(claimInvariant[c.Kind], c.Kind+":"+c.Subject, fmt.Sprintf("%s: %s done %d times", c.Subject, c.Kind, c.N))
	}

	ids, err := Query(ctx, e.DB, "DELETE FROM sections WHERE proc = $1 RETURNING id", []any{e.Proc}, pgx.RowTo[int64])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of sections: %w", err))
	}
	left := 0
	for _, id := range ids {
		if !e.unexited.has(id) {
			left++
		}
	}
	e.unexited.remove(ids)
	if left > 0 {
		e.Rec.Violation(InvNoLeaks, "sections", fmt.Sprintf("%d critical section(s) still registered after the run", left))
	}

	if err := e.auditConfig(true); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AuditConfig checks the config file alone, while the workloads run: every
// key this Env saved must be in it. Run it every second or so: it is what
// shows a lost key live, and what lets the config editor prune its checked
// keys from the file (the file holds the keys saved since about the last
// check).
func (e *Env) AuditConfig() error { return e.auditConfig(false) }
