package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/redislog"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/sim"
	"github.com/locktop/locktop/ui"
	"github.com/locktop/locktop/workers"
)

// The dashboard drives the simulator through ui.Simulator.
var _ ui.Simulator = (*sim.Sim)(nil)

// simHooks lets tests of the command force an interleaving (nil otherwise).
var simHooks *workers.Hooks

func init() {
	register(command{name: "sim", summary: "run the simulator headless, as a load test (locktop sim --headless --scenario NAME)", run: runSim})
}

// runSim is "locktop sim": with --headless it runs a scenario for a while
// and reports; the interactive simulator is the dashboard's.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sim")
	headless := fs.Bool("headless", false, "run without the dashboard and print a report (required for now)")
	scenario := fs.String("scenario", "steady", "scenario: "+strings.Join(sim.Scenarios(), ", "))
	list := fs.Bool("list", false, "list the scenarios and exit")
	duration := fs.Duration("duration", 30*time.Second, "how long to run")
	agents := fs.Int("agents", 0, "number of agents (0: the scenario's)")
	goroutines := fs.Int("goroutines", 0, "hook goroutines (0: the scenario's)")
	hookRate := fs.Float64("hook-rate", 0, "hooks per second (0: the scenario's, -1: no limit)")
	noLocks := fs.Bool("no-locks", false, "turn every lock off: the invariant checks must catch the races")
	shared := fs.Bool("shared-pool", false, "take lock connections from the work pool, as the hook service's original single pool of 25 did")
	lockConns := fs.Int("lock-conns", 0, "size of the lock pool (0: 200, enough for every scenario)")
	lockTimeout := fs.Duration("lock-timeout", 0, "timeout of blocking acquires (0: the scenario's, 15s by default)")
	schema := fs.String("schema", "locktop_sim", "the simulator's schema (created if missing; no other table is touched)")
	reset := fs.Bool("reset", false, "drop the simulator's schema first (never while another simulator uses it)")
	jsonPath := fs.String("json", "", "write the report as JSON to this file (- for stdout)")
	conn := addConnFlags(fs) // with none given: DATABASE_URL, the PG* variables, else a throw-away PostgreSQL
	logPath := fs.String("log", "", "write warnings (worker errors, violations, lost locks) to this file")
	watch := fs.Bool("watch-deadlocks", false, "watch for deadlocks across kinds as a monitor would (every 200ms, each source): any reported is a violation unless the scenario made it (scenario deadlock always watches)")
	sys := addSystemFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *list {
		for _, name := range sim.Scenarios() {
			d, _ := sim.Describe(name)
			fmt.Fprintf(stdout, "%-20s %s\n", name, d)
		}
		return nil
	}
	if !*headless {
		return usagef("the interactive simulator is the dashboard's: run \"locktop\" (throw-away PostgreSQL with the simulator) or \"locktop --dsn URL --sim\"; for a load test use \"locktop sim --headless\"")
	}
	switch {
	case !slices.Contains(sim.Scenarios(), *scenario):
		return usagef("unknown scenario %q (have %s)", *scenario, strings.Join(sim.Scenarios(), ", "))
	case *duration <= 0:
		return usagef("--duration must be positive, not %s", *duration)
	case *agents < 0 || *goroutines < 0 || *sys.conversations < 0:
		return usagef("--agents, --conversations and --goroutines must not be negative")
	case *hookRate < 0 && *hookRate != -1:
		return usagef("--hook-rate must be positive, 0 (the scenario's) or -1 (no limit)")
	case *lockConns < 0 || *lockConns > 10000:
		return usagef("--lock-conns must be between 1 and 10000 (0: the default)")
	case *lockTimeout < 0:
		return usagef("--lock-timeout must not be negative")
	}
	if err := workers.ValidSchema(*schema); err != nil {
		return usagef("--schema: %q is not a plain schema name: use lower-case letters, digits and _ (at most 63)", *schema)
	}

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return usagef("--log: %v", err)
		}
		defer f.Close()
		logger = slog.New(slog.NewTextHandler(f, nil))
	}
	redislog.Install(logger)

	if err := sys.check(); err != nil {
		return err
	}

	dsn, given := conn.resolve()
	if !given {
		fmt.Fprintln(stderr, "starting a throw-away PostgreSQL...")
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return err
		}
		defer c.Stop()
		dsn = c.DSN("postgres")
	}
	redisURL, stopRedis, err := sys.redis(ctx, *scenario, stderr)
	if err != nil {
		return err
	}
	defer stopRedis()

	s, err := sim.New(ctx, sim.Options{
		DSN: dsn, Scenario: *scenario, Agents: *agents, Goroutines: *goroutines, HookRate: *hookRate,
		NoLocks: *noLocks, SharedPool: *shared, LockMaxConns: int32(*lockConns), LockTimeout: *lockTimeout,
		Schema: *schema, Reset: *reset, Logger: logger, Hooks: simHooks,
		RedisURL: redisURL, FailOpen: *sys.failOpen, Conversations: *sys.conversations,
		LeaseStore: *sys.leaseStore, LeasePath: *sys.leasePath, WatchDeadlocks: *watch,
	})
	if err != nil {
		if errors.Is(err, sim.ErrUnusable) {
			return exitError{code: exitUsage, err: pgsource.Describe(err)}
		}
		if errors.Is(err, sim.ErrUnknownScenario) {
			return usageError{err.Error()}
		}
		return err
	}
	defer s.Close()

	fmt.Fprintf(stderr, "running %s for %s...\n", *scenario, *duration)
	rctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	runErr := s.Run(rctx)
	if errors.Is(runErr, sim.ErrServerGone) {
		// The run was stopped without its final checks: no report to trust.
		return exitError{code: exitUsage, err: runErr}
	}
	rep := s.Report()
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, stdout, rep); err != nil {
			return err
		}
	}
	if !rep.OK {
		n := rep.Violations()
		if n == 0 && rep.Errors.TooMany {
			return exitError{code: exitFailure, err: fmt.Errorf("scenario %s: %s (more than %.0f%% fails a run)", rep.Scenario, rep.Errors.Line(), 100*sim.MaxErrorShare)}
		}
		if n == 0 && runErr != nil {
			return fmt.Errorf("the final checks did not complete: %w", runErr)
		}
		return exitError{code: exitFailure, err: fmt.Errorf("%d invariant violation(s) in scenario %s", n, rep.Scenario)}
	}
	return nil
}

func writeJSON(path string, stdout io.Writer, rep sim.Report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}
