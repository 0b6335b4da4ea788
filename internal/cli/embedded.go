package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/sim"
)

// startEmbeddedSim starts the simulator for the dashboard: scenario (""
// is "steady") on dsn, locks on, separate pools, warnings to log (nil
// discards them). It returns the simulator, its pool source and a stop
// function that stops it, runs the final checks and closes its pools. The
// dashboard's embedded mode (locktop with no arguments) and --sim use it.
func startEmbeddedSim(ctx context.Context, dsn, scenario string, log *slog.Logger, observers ...lockcore.Observer) (*sim.Sim, func() []model.PoolStats, func(), error) {
	return startEmbeddedSimWith(ctx, sim.Options{DSN: dsn, Scenario: scenario, Logger: log, Observers: observers})
}

// startEmbeddedSimWith is startEmbeddedSim with every option: the demo
// passes its throw-away Redis (RedisURL) so that scenario "all" runs the
// turns too. Where the simulator's locks live (for the dashboard's
// sources) is the returned simulator's Where().
func startEmbeddedSimWith(ctx context.Context, opts sim.Options) (*sim.Sim, func() []model.PoolStats, func(), error) {
	s, err := sim.New(ctx, opts)
	if err != nil {
		if errors.Is(err, sim.ErrUnusable) {
			return nil, nil, nil, exitError{code: exitUsage, err: pgsource.Describe(err)}
		}
		return nil, nil, nil, err
	}
	if err := s.Start(); err != nil {
		s.Close()
		return nil, nil, nil, err
	}
	return s, s.Pools, func() { _ = s.Close() }, nil
}

// demoSystems is what the demo starts beside its throw-away PostgreSQL
// for seeds 002 and 004: a throw-away Redis for the conversation turns
// (the jobs' leases live in the PostgreSQL, schema locktop_lease). The
// simulator's Where() says where every kind of lock lives, for the
// dashboard's sources.
type demoSystems struct {
	redisURL string
}

// start starts the throw-away Redis and, when the scenario was not chosen
// (pick), makes it "all": every lock system at once. It returns what stops
// the Redis.
func (d *demoSystems) start(ctx context.Context, stderr io.Writer, pick bool, scenario *string) (func(), error) {
	if pick {
		*scenario = "all"
	}
	fmt.Fprintln(stderr, "locktop: starting a throw-away Redis…")
	rs, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		return nil, err
	}
	d.redisURL = rs.URL()
	return func() {
		fmt.Fprintln(stderr, "locktop: removing the throw-away Redis…")
		if err := rs.Stop(); err != nil {
			fmt.Fprintln(stderr, "locktop:", err)
		}
	}, nil
}
