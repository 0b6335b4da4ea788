package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/sim"
	"github.com/locktop/locktop/ui"
)

// isTerminal reports whether f is a terminal; tests replace it.
var isTerminal = func(f *os.File) bool { return term.IsTerminal(f.Fd()) }

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
	history        *historyFlags
	sources        *sourceFlags
}

// newDashboardFlags defines the dashboard's flags; locktop --help lists
// them too.
func newDashboardFlags() (*flagSet, *dashboardFlags) {
	fs := newFlagSet("dashboard")
	f := &dashboardFlags{conn: addConnFlags(fs)}
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
	if !slices.Contains(sim.Scenarios(), *scenario) {
		return usagef("unknown scenario %q (have %s)", *scenario, strings.Join(sim.Scenarios(), ", "))
	}
	dsn, given := f.conn.resolve()
	if given && !*withSim && fs.Changed("scenario") {
		return usagef("--scenario picks the simulator's scenario: with a database given, add --sim to run the simulator")
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
		if ln, err = listenHTTP(*httpAddr, stderr); err != nil {
			return err
		}
		defer ln.Close()
	}

	opts := ui.Options{Interval: *interval, FastInterval: *f.waitInterval, Logger: logger}
	if ln != nil {
		if w := exposureWarning(ln.Addr()); w != "" {
			opts.Warnings = append(opts.Warnings, "--http "+w)
		}
	}
	red := newRedactor(dsn)
	runSim := *withSim
	demo := demoSystems{redisURL: f.sources.redisURL()} // the Redis of the simulator's turns: --redis, else $REDIS_URL
	if given {
		logger.Info("dashboard starting", "server", red.target(), "sim", *withSim, "allow_terminate", *allowTerminate)
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
		dsn, red, runSim = c.DSN("postgres"), newRedactor(""), true
		logger.Info("dashboard starting", "server", "throw-away cluster", "dir", c.Dir())
		opts.ThrowAway = true
		stopRedis, err := demo.start(ctx, stderr, !fs.Changed("scenario"), scenario)
		if err != nil {
			return err
		}
		defer stopRedis()
		*f.sources.redis = demo.redisURL // watched too; the leases are in the watched database
	}

	opts.Server = newRedactor(dsn).target() // the header names the server, never its password
	mon, err := openMonitor(ctx, dsn)
	if err != nil {
		return red.err(err)
	}
	defer mon.Close()
	others, closeOthers, err := otherSources(ctx, f.sources, dsn)
	if err != nil {
		return red.err(err)
	}
	defer closeOthers()
	var src ui.Source = mon
	var observers []lockcore.Observer
	var mo *monitoring
	if ln != nil {
		// The endpoints serve the dashboard's own polls: no second poller.
		mo = newMonitoring(mon, others, false, 2*(*interval), logger)
		src = mo
		observers = append(observers, mo.met.Observer())
		srvCtx, stopServing := context.WithCancel(ctx)
		served := make(chan error, 1)
		go func() { served <- httpapi.ServeListener(srvCtx, ln, mo.handler) }()
		defer func() {
			stopServing()
			if err := <-served; err != nil {
				logger.Warn("http server", "err", err.Error())
			}
		}()
		logger.Info("serving the monitoring endpoints", "addr", ln.Addr().String())
	}
	opts.Source = redactingSource{src, red}
	opts.Sources = uiSources(mo, others)
	if *allowTerminate {
		opts.Terminate = red.terminate(mon.Terminate)
	}
	if runSim {
		s, pools, stop, err := startEmbeddedSimWith(ctx, sim.Options{DSN: dsn, Scenario: *scenario, Logger: logger, Observers: observers, RedisURL: demo.redisURL})
		if err != nil {
			return red.err(fmt.Errorf("starting the simulator: %w", err))
		}
		defer stop()
		opts.Simulator = s // its status carries its pools for the gauges
		if mo != nil {
			mo.met.AddPools(pools)
		}
	}
	if *f.record != "" {
		closeRec, err := recordOptions(&opts, *f.record, logger)
		if err != nil {
			return err
		}
		defer closeRec()
	}
	hist, err := historyOptions(&opts, f.history, logger)
	if err != nil {
		return err
	}
	if hist != nil {
		defer hist.Close()
		if mo != nil {
			mo.keep(hist)
		}
		opts.History = func() (ui.Replay, error) {
			r, err := hist.Recording()
			if err != nil {
				return nil, err
			}
			return r, nil
		}
	}
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

// redactor keeps a DSN's password off the screen and out of the log: every
// error text that reaches either passes through it.
type redactor struct {
	password string
	dsn      string
}

var passwordKV = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// newRedactor finds the password dsn carries, whether in the DSN itself
// or from PGPASSWORD or a password file.
func newRedactor(dsn string) *redactor {
	r := &redactor{dsn: dsn}
	if cfg, err := pgconn.ParseConfig(dsn); err == nil {
		r.password = cfg.Password
	} else if u, err := url.Parse(dsn); err == nil && u.User != nil {
		r.password, _ = u.User.Password()
	} else if m := passwordKV.FindStringSubmatch(dsn); m != nil {
		r.password = strings.Trim(m[1], "'")
	}
	return r
}

// text removes the password from s.
func (r *redactor) text(s string) string {
	if r.password == "" {
		return s
	}
	return strings.ReplaceAll(s, r.password, "xxxxx")
}

// err returns err with the password removed from its text; errors.Is and
// errors.As still see the original.
func (r *redactor) err(err error) error {
	if err == nil || r.password == "" || !strings.Contains(err.Error(), r.password) {
		return err
	}
	var ee exitError
	if errors.As(err, &ee) {
		return exitError{code: ee.code, err: redactedError{r.text(err.Error()), err}}
	}
	return redactedError{r.text(err.Error()), err}
}

// target names the server for the log: user@host:port/database, no
// password.
func (r *redactor) target() string {
	cfg, err := pgconn.ParseConfig(r.dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

func (r *redactor) terminate(fn func(context.Context, int32) error) func(context.Context, int32) error {
	return func(ctx context.Context, pid int32) error { return r.err(fn(ctx, pid)) }
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// redactingSource is a ui.Source whose errors never carry the password.
type redactingSource struct {
	ui.Source
	red *redactor
}

func (s redactingSource) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := s.Source.Poll(ctx)
	return snap, s.red.err(err)
}
