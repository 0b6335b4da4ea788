package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/sim"
	"github.com/locktop/locktop/ui"
)

// errNoTerminal is the one line a dashboard run without a terminal gets.
var errNoTerminal = exitError{code: exitUsage, err: errors.New(
	`the dashboard needs a terminal (stdin and stdout); without one use "locktop snapshot --json" or "locktop sim --headless"`)}

// dashboardFlags are the bare locktop's flags.
type dashboardFlags struct {
	conn           *connFlags
	withSim        *bool
	scenario       *string
	interval       *time.Duration
	waitInterval   *time.Duration
	allowTerminate *bool
	httpAddr       *string
	logPath        *string
	record         *string
	exposure       *exposureFlags
	history        *historyFlags
	sources        *sourceFlags
	targets        *targetFlags
}

// newDashboardFlags defines the dashboard's flags; locktop --help lists
// them too.
func newDashboardFlags() (*flagSet, *dashboardFlags) {
	fs := newFlagSet("dashboard")
	f := &dashboardFlags{conn: addConnFlags(fs)}
	f.targets = addTargetFlags(fs)
	f.withSim = fs.Bool("sim", false, "also run the simulator against the named database (load tests in staging)")
	f.scenario = fs.String("scenario", "steady", "the simulator's scenario `NAME` to start with (locktop sim --list names them; the demo runs \"all\" unless given)")
	f.interval = fs.Duration("interval", ui.DefaultInterval, "refresh interval")
	f.waitInterval = addWaitInterval(fs)
	f.allowTerminate = fs.Bool("allow-terminate", false, "allow terminating a backend from the dashboard (asks for confirmation)")
	f.httpAddr = fs.String("http", "", "also serve /api/locks, /api/advisory-locks, /metrics and /healthz on this `address` (e.g. "+httpapi.DefaultAddr+")")
	f.record = fs.String("record", "", "also record every snapshot to this new `file` (locktop replay and report read it)")
	f.history = addHistoryFlags(fs)
	f.logPath = fs.String("log", "", "log `file` (the dashboard owns the screen; default $XDG_CACHE_HOME/locktop/locktop.log)")
	f.sources = addSourceFlags(fs)
	f.exposure = addExposureFlags(fs, true)
	return fs, f
}

// runDashboard is the bare "locktop" command: the dashboard on a
// throw-away PostgreSQL with the simulator, or on the named server
// (read-only unless --sim or --allow-terminate), optionally serving the
// monitoring endpoints on --http too.
func runDashboard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, f := newDashboardFlags()
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	withSim, scenario, interval, allowTerminate, httpAddr := f.withSim, f.scenario, f.interval, f.allowTerminate, f.httpAddr
	logPath := *f.logPath
	if logPath == "" {
		logPath = defaultLogPath()
	}
	if *interval < minInterval {
		return usagef("--interval must be at least %v, not %v", minInterval, *interval)
	}
	if err := checkWaitInterval(*f.waitInterval); err != nil {
		return err
	}
	hcfg, err := f.history.config()
	if err != nil {
		return err
	}
	if !slices.Contains(sim.Scenarios(), *scenario) {
		return usagef("unknown scenario %q (have %s)", *scenario, strings.Join(sim.Scenarios(), ", "))
	}
	dsn, given := f.conn.resolve()
	if given && !*withSim && fs.Changed("scenario") {
		return usagef("--scenario picks the simulator's scenario: with a database given, add --sim to run the simulator")
	}
	srcs, err := f.sources.config()
	if err != nil {
		return err
	}
	var targets []Target
	if f.targets.given() {
		if targets, err = f.targets.resolve(f.conn, srcs); err != nil {
			return err
		}
		if *withSim {
			return usagef("--sim runs the simulator against one server: give it as CONNINFO, not --target")
		}
		if *allowTerminate && len(targets) > 1 {
			return usagef("--allow-terminate works on one server: with several targets the dashboard is read-only")
		}
		given = true
	}
	if !isTerminal(os.Stdin) || !isTerminal(os.Stdout) {
		return errNoTerminal
	}
	logger, closeLog, err := openLog(logPath)
	if err != nil {
		return usagef("--log: %v", err)
	}
	defer closeLog()
	// Listen before anything starts, so a bad or busy address fails first.
	var ln net.Listener
	if *httpAddr != "" {
		if ln, err = listenHTTP(*httpAddr); err != nil {
			return err
		}
		defer ln.Close() // the Stack closes it too; this is for a return before there is one
	}

	exp, err := f.exposure.resolve(ln)
	if err != nil {
		return err
	}
	opts := ui.Options{Interval: *interval, FastInterval: *f.waitInterval, Logger: logger}
	if exp.warning != "" {
		opts.Warnings = append(opts.Warnings, "--http "+exp.warning)
	}
	runSim := *withSim
	demo := demoSystems{redisURL: srcs.Redis} // the Redis of the simulator's turns: --redis, else $REDIS_URL
	if targets != nil {
		logger.Info("dashboard starting", "targets", targetNames(targets))
	} else if given {
		logger.Info("dashboard starting", "server", newRedactor(dsn).target(), "sim", *withSim, "allow_terminate", *allowTerminate)
	} else {
		fmt.Fprintln(stderr, "locktop: starting a throw-away PostgreSQL…")
		c, err := pgcluster.Start(ctx, pgcluster.Options{})
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintln(stderr, "locktop: removing the throw-away PostgreSQL…")
			if err := c.Stop(); err != nil {
				fmt.Fprintln(stderr, "locktop:", err)
			}
		}()
		dsn, runSim = c.DSN("postgres"), true
		logger.Info("dashboard starting", "server", "throw-away cluster", "dir", c.Dir())
		opts.ThrowAway = true
		stopRedis, err := demo.start(ctx, stderr, !fs.Changed("scenario"), scenario)
		if err != nil {
			return err
		}
		defer stopRedis()
		srcs.Redis = demo.redisURL // watched too; the leases are in the watched database
	}

	// The endpoints of --http serve the dashboard's own polls: no second poller.
	st, err := OpenStack(ctx, StackConfig{DSN: dsn, Sources: srcs, Targets: targets, Interval: *interval, Listener: ln, Record: *f.record, History: hcfg,
		Web: exp.web, QueryText: exp.queryText, Log: logger})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Warn("closing", "err", err.Error())
		}
	}()
	opts.Server = st.Target() // the header names the server, never its password
	opts.Source, opts.Sources = st.Server(), st.Sources()
	opts.Deadlocks = st.Deadlocks
	opts.Targets = st.Targets()
	if *allowTerminate {
		opts.Terminate = st.Terminate
		opts.ForceRelease = st.ForceRelease()
	}
	if runSim {
		s, pools, stop, err := startEmbeddedSimWith(ctx, sim.Options{DSN: dsn, Scenario: *scenario, Logger: logger, Observers: st.Observers(), RedisURL: demo.redisURL})
		if err != nil {
			return st.Redact(fmt.Errorf("starting the simulator: %w", err))
		}
		defer stop()
		opts.Simulator = s // its status carries its pools for the gauges
		st.AddPools(pools)
	}
	opts.History = rewindable(st.History())
	setDashboardProcs(opts.Simulator != nil, ln != nil)
	return ui.Run(ctx, opts)
}

// defaultLogPath is $XDG_CACHE_HOME/locktop/locktop.log (~/.cache on
// Linux), else a file in the temporary directory.
func defaultLogPath() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "locktop", "locktop.log")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("locktop-%d.log", os.Getuid()))
}

// openLog opens the log file for appending, creating its directory.
func openLog(path string) (*slog.Logger, func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return slog.New(slog.NewTextHandler(f, nil)), func() { f.Close() }, nil
}
