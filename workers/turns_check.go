package workers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Audit checks, over the database and Redis, the turns of the current run
// (since Env.Begin) on the conversations this process committed to, and
// reports what the live checks did not:
//
//   - turn numbers per conversation: no number twice (a collision) and no
//     gap between the run's first and last;
//   - no message answered twice; no scenario step advanced twice from the
//     same step (applied from stale state);
//   - no turn accepted with a fence older than one committed before it;
//   - every turn's hold released or expired: once the turns have stopped,
//     a hold of this process's pods still in Redis must be one left to
//     expire (a crashed pod's, a release that could not reach Redis) with
//     at most the TTL left; anything else leaked.
//
// Run it once the turns have stopped.
func (t *Turns) Audit(ctx context.Context) error {
	var errs []error
	since, proc := t.env.Since(), t.env.Proc
	mine := `conv_id IN (SELECT conv_id FROM conv_turns WHERE proc = $2 AND at >= $1)`
	type pair struct {
		Conv, A, N int64
	}
	q := func(sql string) []pair {
		rows, err := Query(ctx, t.env.DB, sql, []any{since, proc}, pgx.RowToStructByPos[pair])
		if err != nil {
			errs = append(errs, fmt.Errorf("audit of turns: %w", err))
		}
		return rows
	}
	for _, p := range q(`SELECT conv_id, turn_no, count(*) FROM conv_turns WHERE at >= $1 AND ` + mine + ` GROUP BY 1, 2 HAVING count(*) > 1`) {
		t.report(InvTurnSequence, fmt.Sprintf("turn:%d/%d", p.Conv, p.A),
			fmt.Sprintf("%s: turn number %d committed %d times (collision)", t.opts.Prefix+ConversationKey(int32(p.Conv)), p.A, p.N))
	}
	for _, p := range q(`SELECT conv_id, max(turn_no) - min(turn_no) + 1 - count(DISTINCT turn_no), count(DISTINCT turn_no)
		FROM conv_turns WHERE at >= $1 AND ` + mine + ` GROUP BY 1 HAVING max(turn_no) - min(turn_no) + 1 <> count(DISTINCT turn_no)`) {
		t.report(InvTurnSequence, fmt.Sprintf("gap:%d", p.Conv),
			fmt.Sprintf("%s: %d turn number(s) missing from the sequence", t.opts.Prefix+ConversationKey(int32(p.Conv)), p.A))
	}
	for _, p := range q(`SELECT conv_id, step_from, count(*) FROM conv_turns WHERE at >= $1 AND ` + mine + ` GROUP BY 1, 2 HAVING count(*) > 1`) {
		t.report(InvStaleStep, fmt.Sprintf("step:%d/%d", p.Conv, p.A),
			fmt.Sprintf("%s: scenario step %d advanced %d times: applied from stale state", t.opts.Prefix+ConversationKey(int32(p.Conv)), p.A, p.N))
	}
	for _, p := range q(`SELECT t.id, t.fence, max(p.fence) FROM conv_turns t
		JOIN conv_turns p ON p.conv_id = t.conv_id AND p.id < t.id AND p.at >= $1
		WHERE t.at >= $1 AND t.proc = $2 AND t.fence > 0 GROUP BY 1, 2 HAVING max(p.fence) > t.fence`) {
		t.report(InvStaleFence, "commit:"+strconv.FormatInt(p.Conv, 10),
			fmt.Sprintf("turn %d: accepted with fence %d after a commit with fence %d", p.Conv, p.A, p.N))
	}
	type dup struct {
		Msg string
		N   int64
	}
	msgs, err := Query(ctx, t.env.DB, `SELECT message_id, count(*) FROM conv_turns WHERE at >= $1
		AND message_id IN (SELECT message_id FROM conv_turns WHERE proc = $2 AND at >= $1) GROUP BY 1 HAVING count(*) > 1`,
		[]any{since, proc}, pgx.RowToStructByPos[dup])
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of messages: %w", err))
	}
	for _, m := range msgs {
		t.report(InvAnsweredOnce, "message:"+m.Msg, fmt.Sprintf("message %s answered %d times", m.Msg, m.N))
	}
	if err := t.auditHolds(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// auditHolds reports holds of this process's pods still in Redis that are
// not left to expire.
func (t *Turns) auditHolds(ctx context.Context) error {
	infos, err := t.Inspect(ctx)
	if err != nil {
		return fmt.Errorf("audit of the session locks: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, in := range infos {
		if !t.owners[in.Owner] && !strings.HasPrefix(in.Owner, t.env.Proc+"/") {
			continue // another process's
		}
		if t.abandoned[in.Token] && in.TTL <= t.opts.TTL {
			continue // left to expire, and expiring
		}
		t.report(InvTurnLocks, "hold:"+in.Key+"/"+strconv.FormatInt(in.Fence, 10),
			fmt.Sprintf("%s%s still held by %s (fence %d, %s left) after the turns stopped: leaked",
				t.opts.Prefix, in.Key, in.Owner, in.Fence, in.TTL.Round(1e6)))
	}
	return nil
}
