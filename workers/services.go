package workers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/model"
)

// Summarise summarises turn, as the seed's summarisation service does: in
// one transaction it takes the turn's row with SELECT ... FOR UPDATE NOWAIT;
// if another summariser holds the row (55P03) it returns "" without a call;
// if the turn has a summary it returns that; otherwise it makes the (slow)
// LLM call holding the row and stores the result.
func (e *Env) Summarise(ctx context.Context, turn int64) (string, error) {
	label := "turn " + strconv.FormatInt(turn, 10) // the lock is the turn's row
	q := "SELECT agent_id, summary FROM turns WHERE id = $1"
	locking := e.Locking()
	if locking {
		q += " FOR UPDATE NOWAIT"
	}
	start := time.Now()
	var out string
	var got bool
	err := e.DB.Tx(ctx, func(tx pgx.Tx) error {
		var agent int32
		var summary *string
		if err := tx.QueryRow(ctx, q, turn).Scan(&agent, &summary); err != nil {
			return err
		}
		got = true
		e.Rec.Attempt(Attempt{Kind: KindSummariser, Label: label, Outcome: model.OutcomeAcquired, Wait: time.Since(start)})
		if summary != nil {
			out = *summary
			return nil
		}
		e.at(ctx, PointSummaryChecked, agent)
		// The LLM call, recorded in the transaction that holds the row (a
		// second connection per summariser could exhaust the pool).
		if err := e.claimTx(ctx, tx, KindSummariser, claimSummary, "turn "+strconv.FormatInt(turn, 10), "summary call"); err != nil {
			return err
		}
		e.at(ctx, PointSummaryClaimed, agent)
		if err := sleep(ctx, e.Timing().LLM); err != nil {
			return err
		}
		out = fmt.Sprintf("summary of turn %d", turn)
		_, err := tx.Exec(ctx, "UPDATE turns SET summary = $2 WHERE id = $1", turn, out)
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		e.Rec.Section(KindSummariser)
		return out, nil
	case !got && errors.As(err, &pgErr) && pgErr.Code == "55P03":
		e.Rec.Attempt(Attempt{Kind: KindSummariser, Label: label, Outcome: model.OutcomeSkipped, Wait: time.Since(start)})
		return "", nil
	}
	e.Rec.Attempt(Attempt{Kind: KindSummariser, Label: label, Outcome: classify(ctx, err), Wait: time.Since(start), Err: err, Body: got})
	return "", err
}

// InjectSkills injects the persona skills into agent's session once. Under
// the agent lock (taken here unless ctx is already inside a section of the
// agent, as the session_start hook's is) it re-reads the agent before checking
// prompt_injected_at, the seed's defence against a stale read; if it is
// set, injection is skipped.
func (e *Env) InjectSkills(ctx context.Context, agent int32) error {
	body := func(ctx context.Context) error {
		var session int32
		var injected *time.Time
		if err := e.DB.Get(ctx, "SELECT session_no, prompt_injected_at FROM agents WHERE id = $1",
			[]any{agent}, &session, &injected); err != nil {
			return err
		}
		if injected != nil {
			return nil
		}
		e.at(ctx, PointInjectChecked, agent)
		if err := sleep(ctx, e.Timing().Inject); err != nil {
			return err
		}
		subject := fmt.Sprintf("agent %d session %d", agent, session)
		return e.writeTx(ctx, agent, func(tx pgx.Tx) error {
			if err := e.claimTx(ctx, tx, KindSkillInjector, claimInjection, subject, "skill injection"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE agents SET prompt_injected_at = now() WHERE id = $1", agent)
			return err
		})
	}
	if inSection(ctx, agent) {
		return body(ctx) // part of the section ctx is in (session_start's), locked or not
	}
	_, err := e.withAgent(ctx, KindSkillInjector, "", agent, body)
	return err
}

// Handoff hands agent over to a successor, as the seed's handoff executor
// does under the agent lock: read the agent's generation, prepare the
// handoff, write the next generation.
func (e *Env) Handoff(ctx context.Context, agent int32) error {
	_, err := e.withAgent(ctx, KindHandoff, "", agent, func(ctx context.Context) error {
		gen, err := e.readCounter(ctx, agent, "generation")
		if err != nil {
			return err
		}
		e.at(ctx, PointHandoffChecked, agent)
		if err := sleep(ctx, e.Timing().Handoff); err != nil {
			return err
		}
		subject := fmt.Sprintf("agent %d generation %d", agent, gen)
		return e.writeTx(ctx, agent, func(tx pgx.Tx) error {
			if err := e.claimTx(ctx, tx, KindHandoff, claimHandoff, subject, "handoff"); err != nil {
				return err
			}
			return e.writeCounterTx(ctx, tx, KindHandoff, agent, "generation", gen+1)
		})
	})
	return err
}

// RemoteSend sends a prompt to agent if it is ready, as the seed's remote
// agent service does under the agent lock: read the agent; if it is idle,
// send and mark it processing. An agent that is not ready is left alone.
func (e *Env) RemoteSend(ctx context.Context, agent int32) error {
	_, err := e.withAgent(ctx, KindRemote, "", agent, func(ctx context.Context) error {
		var state string
		var ready int64
		if err := e.DB.Get(ctx, `SELECT a.state, c.value FROM agents a
			JOIN counters c ON c.agent_id = a.id AND c.field = 'ready' WHERE a.id = $1`,
			[]any{agent}, &state, &ready); err != nil {
			return err
		}
		if state != "idle" {
			return nil
		}
		e.at(ctx, PointSendChecked, agent)
		if err := sleep(ctx, e.Timing().Send); err != nil {
			return err
		}
		subject := fmt.Sprintf("agent %d readiness %d", agent, ready)
		return e.writeTx(ctx, agent, func(tx pgx.Tx) error {
			if err := e.claimTx(ctx, tx, KindRemote, claimSend, subject, "remote send"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE agents SET state = 'processing', last_seen = now() WHERE id = $1", agent)
			return err
		})
	})
	return err
}
