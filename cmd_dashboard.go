package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/pgcluster"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// startSimulator starts the simulator on the database at dsn with the named
// scenario and returns it, the pools it runs on (for the gauges) and a stop
// function that ends it and waits for its workers. It is nil until the
// simulator is part of the build; the dashboard then runs without one.
var startSimulator func(ctx context.Context, dsn string, scenario string) (sim ui.Simulator, pools func() []model.PoolStats, stop func(), err error)

// isTerminal reports whether f is a terminal; tests replace it.
var isTerminal = func(f *os.File) bool { return term.IsTerminal(f.Fd()) }

// errNoTerminal is the one line a dashboard run without a terminal gets.
var errNoTerminal = exitError{code: exitUsage, err: errors.New(
	`the dashboard needs a terminal (stdin and stdout); without one use "locktop snapshot --json" or "locktop sim --headless"`)}

// runDashboard is the bare "locktop" command: the dashboard on a
// throw-away PostgreSQL with the simulator, or on --dsn's server (read-only
// unless --sim or --allow-terminate).
func runDashboard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dashboard", stderr)
	dsnFlag := fs.String("dsn", "", "`URL` or key=value DSN of the server to watch (default: DATABASE_URL, then the PG* variables; with none, a throw-away PostgreSQL with the simulator)")
	withSim := fs.Bool("sim", false, "also run the simulator against --dsn's database (load tests in staging)")
	scenario := fs.String("scenario", "steady", "simulator scenario to start with")
	interval := fs.Duration("interval", ui.DefaultInterval, "refresh interval")
	allowTerminate := fs.Bool("allow-terminate", false, "allow terminating a backend from the dashboard (asks for confirmation)")
	logPath := fs.String("log", defaultLogPath(), "log `file` (the dashboard owns the screen)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval < 100*time.Millisecond {
		return usagef("--interval must be at least 100ms, not %v", *interval)
	}
	dsn, given := resolveDSN(*dsnFlag)
	if given && *withSim && startSimulator == nil {
		return usagef("--sim: this build of locktop has no simulator")
	}
	if !isTerminal(os.Stdin) || !isTerminal(os.Stdout) {
		return errNoTerminal
	}
	logger, closeLog, err := openLog(*logPath)
	if err != nil {
		return usagef("--log: %v", err)
	}
	defer closeLog()

	opts := ui.Options{Interval: *interval, Logger: logger}
	if !given {
		return runEmbedded(ctx, opts, *scenario, *allowTerminate, stderr)
	}
	red := newRedactor(dsn)
	logger.Info("dashboard starting", "server", red.target(), "sim", *withSim, "allow_terminate", *allowTerminate)
	mon, err := openMonitor(ctx, dsn)
	if err != nil {
		return red.err(err)
	}
	defer mon.Close()
	opts.Source = redactingSource{mon, red}
	opts.Mode = "read-only"
	if *allowTerminate {
		opts.Terminate = red.terminate(mon.Terminate)
		opts.Mode = "terminate allowed"
	}
	if *withSim {
		sim, pools, stop, err := startSimulator(ctx, dsn, *scenario)
		if err != nil {
			return red.err(fmt.Errorf("starting the simulator: %w", err))
		}
		defer stop()
		opts.Simulator, opts.Pools = sim, pools
		opts.Mode = "simulator attached"
	}
	return ui.Run(ctx, opts)
}

// runEmbedded runs the dashboard on a throw-away cluster with the
// simulator, and removes the cluster when the dashboard ends.
func runEmbedded(ctx context.Context, opts ui.Options, scenario string, allowTerminate bool, stderr io.Writer) error {
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
	dsn := c.DSN("postgres")
	opts.Logger.Info("dashboard starting", "server", "throw-away cluster", "dir", c.Dir())
	mon, err := openMonitor(ctx, dsn)
	if err != nil {
		return err
	}
	defer mon.Close()
	opts.Source = mon
	opts.Mode = "throw-away server"
	if allowTerminate {
		opts.Terminate = mon.Terminate
	}
	if startSimulator != nil {
		sim, pools, stop, err := startSimulator(ctx, dsn, scenario)
		if err != nil {
			return fmt.Errorf("starting the simulator: %w", err)
		}
		defer stop()
		opts.Simulator, opts.Pools = sim, pools
	} else {
		opts.Logger.Info("no simulator in this build")
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
