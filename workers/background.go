package workers

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/lockcore"
)

// Reap is one cycle of the agent reaper over agents: per agent, try the
// lock, skip the agent if it is held, else check it and commit inside the
// lock before moving on (the seed's commit-inside-lock), so at most one lock
// connection and one work connection are used at a time. It returns the
// first error and carries on past it.
func (e *Env) Reap(ctx context.Context, agents []int32) error {
	return e.each(ctx, KindReaper, agents, func(ctx context.Context, a int32) error {
		var state string
		if err := e.DB.Get(ctx, "SELECT state FROM agents WHERE id = $1", []any{a}, &state); err != nil {
			return err
		}
		if _, err := e.bump(ctx, KindReaper, a, "reaps"); err != nil {
			return err
		}
		if state == "ended" {
			return e.write(ctx, a, "UPDATE agents SET state = 'reaped' WHERE id = $1 AND state = 'ended'", []any{a})
		}
		return nil
	})
}

// Poll is one cycle of the context poller: per agent, try the lock, skip if
// held, else read and write back the agent's context usage.
func (e *Env) Poll(ctx context.Context, agents []int32) error {
	return e.each(ctx, KindPoller, agents, func(ctx context.Context, a int32) error {
		n, err := e.bump(ctx, KindPoller, a, "polls")
		if err != nil {
			return err
		}
		return e.write(ctx, a, "UPDATE agents SET context_pct = $2 WHERE id = $1", []any{a, int32(n % 100)})
	})
}

// Watch is one cycle of the tmux watchdog: per agent, try the lock, skip if
// held, else check the agent's pane.
func (e *Env) Watch(ctx context.Context, agents []int32) error {
	return e.each(ctx, KindWatchdog, agents, func(ctx context.Context, a int32) error {
		_, err := e.bump(ctx, KindWatchdog, a, "checks")
		return err
	})
}

// each runs fn for every agent under a try-lock, one agent at a time,
// skipping agents that are held. It returns the first error and carries on
// past it.
func (e *Env) each(ctx context.Context, kind Kind, agents []int32, fn func(context.Context, int32) error) error {
	var first error
	for _, a := range agents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_, err := e.tryAgent(ctx, kind, a, func(ctx context.Context) error { return fn(ctx, a) })
		if first == nil {
			first = err
		}
	}
	return first
}

// pending is an event in the transcript not yet applied.
type pending struct {
	Event string
	Agent int32
	Route string
}

// Reconcile is one cycle of the transcript reconciler: it finds up to limit
// transcript events older than the reconcile grace that no hook applied
// (their hook timed out, failed, or is still queued), and applies them per
// agent under a try-lock, skipping agents that are held. It returns how
// many it applied.
func (e *Env) Reconcile(ctx context.Context, limit int) (int, error) {
	grace := strconv.FormatInt(e.Timing().ReconcileGrace.Milliseconds(), 10) + " milliseconds"
	evs, err := Query(ctx, e.DB, `SELECT event_id, agent_id, route FROM transcript
		WHERE NOT applied AND at < now() - $1::interval ORDER BY at LIMIT $2`, []any{grace, limit},
		pgx.RowToStructByPos[pending])
	if err != nil {
		return 0, fmt.Errorf("reconciler: reading transcript: %w", err)
	}
	return e.reconcile(ctx, evs, true)
}

// Drain applies every event of this process still unapplied, waiting for
// each agent's lock up to lockcore's default timeout whatever the lock
// timeout is (a final reconcile, when the run stops). It returns how many
// it applied.
func (e *Env) Drain(ctx context.Context) (int, error) {
	evs, err := Query(ctx, e.DB, `SELECT event_id, agent_id, route FROM transcript
		WHERE NOT applied AND proc = $1 ORDER BY at`, []any{e.Proc}, pgx.RowToStructByPos[pending])
	if err != nil {
		return 0, fmt.Errorf("reconciler: reading transcript: %w", err)
	}
	return e.reconcile(ctx, evs, false)
}

func (e *Env) reconcile(ctx context.Context, evs []pending, try bool) (int, error) {
	byAgent := map[int32][]pending{}
	var order []int32
	for _, p := range evs {
		if _, ok := byAgent[p.Agent]; !ok {
			order = append(order, p.Agent)
		}
		byAgent[p.Agent] = append(byAgent[p.Agent], p)
	}
	applied := 0
	var errs []error
	for _, a := range order {
		if ctx.Err() != nil {
			break
		}
		body := func(ctx context.Context) error {
			for _, p := range byAgent[a] {
				ok, err := e.apply(ctx, KindReconciler, p.Event, p.Route, a)
				if err != nil {
					return err
				}
				if ok {
					applied++
				}
			}
			return nil
		}
		var err error
		if try {
			_, err = e.tryAgent(ctx, KindReconciler, a, body)
		} else {
			_, err = e.section(ctx, KindReconciler, "", a, false, max(e.LockTimeout(), lockcore.DefaultWait), body)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return applied, errors.Join(errs...)
}
