package workers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// Route is a hook route.
type Route string

// Hook routes: the 8 mutating ones and the read-only status route.
const (
	RouteSessionStart Route = "session_start"
	RouteSessionEnd   Route = "session_end"
	RoutePromptSubmit Route = "prompt_submit"
	RouteStop         Route = "stop"
	RouteNotification Route = "notification"
	RoutePreToolUse   Route = "pre_tool_use"
	RoutePostToolUse  Route = "post_tool_use"
	RouteSubagentStop Route = "subagent_stop"
	RouteStatus       Route = "status"
)

// MutatingRoutes are the routes that take the AGENT lock.
var MutatingRoutes = []Route{
	RouteSessionStart, RouteSessionEnd, RoutePromptSubmit, RouteStop,
	RouteNotification, RoutePreToolUse, RoutePostToolUse, RouteSubagentStop,
}

// ErrUnknownRoute is returned by Hook for a route it does not know.
var ErrUnknownRoute = errors.New("workers: unknown hook route")

// Hook handles one hook event for agent, as the seed's hook routes do: it
// correlates the agent, writes the event to the transcript, then takes the
// AGENT lock (blocking, up to the lock timeout) and, inside it, applies the
// event to the ledger and makes the route's state changes, committing after
// each step. The status route reads the agent and takes no lock.
//
// An event whose hook fails (a lock timeout, say) stays in the transcript
// unapplied; the reconciler applies it later.
func (e *Env) Hook(ctx context.Context, route Route, agent int32) error {
	if route == RouteStatus {
		return e.Status(ctx, agent)
	}
	body, ok := e.routeBody(route)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownRoute, route)
	}
	key := lockcore.Pair(registry.SpaceAgent, agent)
	// A failure before the lock is this hook's attempt, failed: no attempt
	// was recorded for it yet.
	fail := func(err error) error {
		e.Rec.Attempt(Attempt{Kind: KindHook, Route: string(route), Key: key, Outcome: classify(ctx, err), Err: err})
		return err
	}
	// Session correlation: find the agent the event is for.
	var state string
	if err := e.DB.Get(ctx, "SELECT state FROM agents WHERE id = $1", []any{agent}, &state); err != nil {
		return fail(fmt.Errorf("hook %s: correlating agent %d: %w", route, agent, err))
	}
	// The event reaches the transcript before any lock, as Claude Code
	// writes its transcript whatever the server does.
	ev := e.Proc + "-" + strconv.FormatInt(e.eventCounter.Add(1), 10)
	if _, err := e.DB.Exec(ctx, "INSERT INTO transcript (event_id, agent_id, route, proc) VALUES ($1, $2, $3, $4)",
		ev, agent, string(route), e.Proc); err != nil {
		return fail(fmt.Errorf("hook %s: writing transcript: %w", route, err))
	}
	_, err := e.withAgent(ctx, KindHook, string(route), agent, func(ctx context.Context) error {
		if _, err := e.apply(ctx, KindHook, ev, string(route), agent); err != nil {
			return err
		}
		if err := sleep(ctx, e.Timing().Step); err != nil {
			return err
		}
		return body(ctx, agent)
	})
	return err
}

// Status is the read-only status route: no lock.
func (e *Env) Status(ctx context.Context, agent int32) error {
	var state string
	var applied int64
	err := e.DB.Get(ctx, `SELECT a.state, c.value FROM agents a JOIN counters c ON c.agent_id = a.id AND c.field = 'applied'
		WHERE a.id = $1`, []any{agent}, &state, &applied)
	key := lockcore.Pair(registry.SpaceAgent, agent)
	if err != nil {
		e.Rec.Attempt(Attempt{Kind: KindStatus, Route: string(RouteStatus), Key: key, Outcome: classify(ctx, err), Err: err})
		return err
	}
	e.Rec.Attempt(Attempt{Kind: KindStatus, Route: string(RouteStatus), Key: key}) // no lock: counted as an attempt only
	return nil
}

func (e *Env) routeBody(r Route) (func(context.Context, int32) error, bool) {
	switch r {
	case RouteSessionStart:
		return e.sessionStart, true
	case RouteSessionEnd:
		return e.sessionEnd, true
	case RoutePromptSubmit:
		return e.promptSubmit, true
	case RouteStop:
		return e.stop, true
	case RouteNotification:
		return e.counterRoute(KindHook, "notifications", ""), true
	case RoutePreToolUse:
		return e.counterRoute(KindHook, "tools", "tool"), true
	case RoutePostToolUse:
		return e.counterRoute(KindHook, "progress", "processing"), true
	case RouteSubagentStop:
		return e.counterRoute(KindHook, "subagents", ""), true
	}
	return nil, false
}

// apply applies event ev to agent's ledger, the seed's two-commit capture:
// read whether the event is applied (commit), read the agent's applied
// counter, append the event to the ledger and mark it applied (commit),
// write the counter back (commit). It reports false when the event was
// already applied (by the reconciler, while the hook waited for the lock).
// A hook's capture stalls now and then (Timing.SlowCapture), long enough
// for the reconciler to find the event due.
func (e *Env) apply(ctx context.Context, kind Kind, ev, route string, agent int32) (bool, error) {
	var done bool
	if err := e.DB.Get(ctx, "SELECT applied FROM transcript WHERE event_id = $1", []any{ev}, &done); err != nil {
		return false, fmt.Errorf("reading event %s: %w", ev, err)
	}
	if done {
		return false, nil
	}
	n, err := e.readCounter(ctx, agent, "applied")
	if err != nil {
		return false, err
	}
	e.at(ctx, PointApplyChecked, agent)
	t := e.Timing()
	d := t.Step
	if kind == KindHook && t.SlowCaptureShare > 0 && rand.Float64() < t.SlowCaptureShare {
		d = t.SlowCapture
	}
	if err := sleep(ctx, d); err != nil {
		return false, err
	}
	// The first repeat of an event is reported, and its ledger row marked
	// so that Audit does not report it again.
	var before int64
	err = e.write(ctx, agent, `
		WITH b AS (SELECT count(*) AS n FROM ledger WHERE event_id = $1),
		     l AS (INSERT INTO ledger (event_id, agent_id, route, applied_by, reported) SELECT $1, $2, $3, $4, n = 1 FROM b),
		     t AS (UPDATE transcript SET applied = true WHERE event_id = $1)
		SELECT n FROM b`, []any{ev, agent, route, string(kind)}, &before)
	if err != nil {
		return false, fmt.Errorf("applying event %s: %w", ev, err)
	}
	if before == 1 {
		e.Rec.Violation(InvExactlyOnce, "event:"+ev,
			fmt.Sprintf("AGENT %d: event %s (%s) applied %d times; the last by %s", agent, ev, route, before+1, kind))
	}
	return true, e.writeCounter(ctx, kind, agent, "applied", n+1)
}

// counterRoute is a route that bumps one counter and may set the state.
func (e *Env) counterRoute(kind Kind, field, state string) func(context.Context, int32) error {
	return func(ctx context.Context, agent int32) error {
		if state != "" {
			if err := e.write(ctx, agent, "UPDATE agents SET state = $2, last_seen = now() WHERE id = $1", []any{agent, state}); err != nil {
				return err
			}
		}
		_, err := e.bump(ctx, kind, agent, field)
		return err
	}
}

// sessionStart opens a new session: the agent is idle and ready again, its
// injection mark is cleared, and the persona skills are injected (inline:
// this section already holds the agent).
func (e *Env) sessionStart(ctx context.Context, agent int32) error {
	if err := e.write(ctx, agent, `UPDATE agents SET session_no = session_no + 1, prompt_injected_at = NULL,
		state = 'idle', last_seen = now() WHERE id = $1`, []any{agent}); err != nil {
		return err
	}
	if _, err := e.bump(ctx, KindHook, agent, "ready"); err != nil {
		return err
	}
	return e.InjectSkills(ctx, agent)
}

// promptSubmit starts a command and its first turn.
func (e *Env) promptSubmit(ctx context.Context, agent int32) error {
	return e.writeTx(ctx, agent, func(tx pgx.Tx) error {
		var cmd, turn int64
		if err := tx.QueryRow(ctx, "INSERT INTO commands (agent_id) VALUES ($1) RETURNING id", agent).Scan(&cmd); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "INSERT INTO turns (agent_id, command_id) VALUES ($1, $2) RETURNING id", agent, cmd).Scan(&turn); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE agents SET current_command = $2, current_turn = $3, state = 'processing',
			last_seen = now() WHERE id = $1`, agent, cmd, turn)
		return err
	})
}

// stop ends the turn: the agent is idle and ready for the next prompt; the
// command's completion is deferred (DeferredStop) and the turn is
// summarised, twice at once, as the seed's hook and reconciler both do.
func (e *Env) stop(ctx context.Context, agent int32) error {
	var cmd, turn *int64
	if err := e.DB.Get(ctx, "SELECT current_command, current_turn FROM agents WHERE id = $1", []any{agent}, &cmd, &turn); err != nil {
		return err
	}
	if err := e.write(ctx, agent, "UPDATE agents SET state = 'idle', last_seen = now() WHERE id = $1", []any{agent}); err != nil {
		return err
	}
	if _, err := e.bump(ctx, KindHook, agent, "ready"); err != nil {
		return err
	}
	if cmd != nil {
		c := *cmd
		e.spawn(KindDeferredStop, func(ctx context.Context) { _ = e.DeferredStop(ctx, agent, c) })
	}
	if turn != nil {
		t := *turn
		for range 2 {
			e.spawn(KindSummariser, func(ctx context.Context) { _, _ = e.Summarise(ctx, t) })
		}
	}
	return nil
}

// sessionEnd completes the running command and ends the session.
func (e *Env) sessionEnd(ctx context.Context, agent int32) error {
	var cmd *int64
	if err := e.DB.Get(ctx, "SELECT current_command FROM agents WHERE id = $1", []any{agent}, &cmd); err != nil {
		return err
	}
	if cmd != nil {
		if _, err := e.completeCommand(ctx, KindHook, agent, *cmd); err != nil {
			return err
		}
	}
	return e.write(ctx, agent, "UPDATE agents SET state = 'ended', last_seen = now() WHERE id = $1", []any{agent})
}

// completeCommand completes cmd unless it is already COMPLETE, re-reading
// its state first. It reports whether it completed it.
func (e *Env) completeCommand(ctx context.Context, kind Kind, agent int32, cmd int64) (bool, error) {
	var state string
	if err := e.DB.Get(ctx, "SELECT state FROM commands WHERE id = $1", []any{cmd}, &state); err != nil {
		return false, fmt.Errorf("reading command %d: %w", cmd, err)
	}
	if state == "COMPLETE" {
		e.Rec.Note(kind, lockcore.Pair(registry.SpaceAgent, agent), fmt.Sprintf("command %d already COMPLETE: skipped", cmd))
		return false, nil
	}
	e.at(ctx, PointCompleteChecked, agent)
	if err := sleep(ctx, e.Timing().Step); err != nil {
		return false, err
	}
	err := e.writeTx(ctx, agent, func(tx pgx.Tx) error {
		if err := e.claimTx(ctx, tx, kind, claimCompletion, "command "+strconv.FormatInt(cmd, 10), string(kind)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE commands SET state = 'COMPLETE', completed_by = $2 WHERE id = $1", cmd, string(kind))
		return err
	})
	return err == nil, err
}

// DeferredStop completes cmd after the stop hook, as the seed's fixed
// deferred stop does: sleep first, then take the agent lock, then re-read
// the command and skip it if session_end already completed it.
func (e *Env) DeferredStop(ctx context.Context, agent int32, cmd int64) error {
	if err := sleep(ctx, e.Timing().DeferredStop); err != nil {
		return err
	}
	_, err := e.withAgent(ctx, KindDeferredStop, "", agent, func(ctx context.Context) error {
		_, err := e.completeCommand(ctx, KindDeferredStop, agent, cmd)
		return err
	})
	return err
}
