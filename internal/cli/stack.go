package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/record/history"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/redislog"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// A Stack is everything locktop opens to watch one PostgreSQL server: the
// monitor (package pgsource), the lock sources beside it (a Redis of
// session mutexes, lease tables), the redactor that keeps the DSN's
// password out of every error, and, when asked, the monitoring endpoints
// (/api/locks, /metrics, …) and a recording of every snapshot. OpenStack
// opens them in order and Close closes them in the reverse order, in one
// place; a command opens one Stack and polls what it gives:
//
//	st, err := OpenStack(ctx, StackConfig{DSN: dsn, Sources: srcs, Interval: time.Second})
//	if err != nil {
//		return err // one line, no password, exit code 2 when the server cannot be used
//	}
//	defer st.Close()
//	opts := ui.Options{Source: st.Server(), Sources: st.Sources(), Server: st.Target()}
//
// Who polls: by default the command does, through Server and Sources
// (the dashboard's loops, record's loops, snapshot's one PollAll); each
// answer is recorded and, with a Listener, published to the endpoints as
// it passes. With StackConfig.Poll the Stack polls every source itself in
// Run, for the endpoints and the recording (serve).
//
// A Stack holds no global state: several side by side, one per watched
// server, each with its own config, share nothing but the process. Its
// methods are safe for concurrent use once OpenStack has returned.
type Stack struct {
	cfg     StackConfig
	members []*member           // one per target; members[0] is Server's
	server  ui.Source           // what Server returns
	others  []source.Source     // what Sources returns
	redis   *redissource.Source // the first target's Redis source, when watched (ForceRelease)
	mo      *monitoring         // the endpoints; nil without a Listener
	w       *recording.Writer
	hist    *history.History // the kept past; nil with no History

	stopServing context.CancelFunc
	served      chan error // the HTTP server's result, once stopped
	closers     []func()   // in opening order; Close runs them backwards
	closeOnce   sync.Once
	closeErr    error
}

// StackConfig says what one Stack opens. Only DSN names something to
// connect to; the zero value of every other field leaves its part out.
type StackConfig struct {
	// DSN is the PostgreSQL server to watch, as connFlags.resolve returns
	// it: a URL or key=value string, or "" for what the PG* variables say.
	DSN string
	// Sources are the lock sources beside the server. Its zero value
	// watches the server's own lease schema when it has one, nothing else.
	Sources SourceConfig
	// Targets, when not empty, are the servers to watch instead of DSN and
	// Sources, each under its name, each with its own sources (--target,
	// --config): every lock carries its target's name (model.Lock.Server)
	// and every source's name says whose it is ("b/redis"). The sources
	// are in target order, each target's server first: Server is the first
	// target's, Sources every other. A target that does not answer at
	// start is retried at each poll, never failing the others.
	Targets []Target
	// Interval is how often the sources are polled: the recording's header
	// says it, the endpoints poll by themselves once their snapshot is
	// older than twice it, and Run polls at it. Required with Poll,
	// Listener or Record.
	Interval time.Duration
	// Listener, when not nil, serves the monitoring endpoints on it from
	// OpenStack on (listenHTTP opens one and warns when it is reachable
	// from other machines). The Stack owns it: Close closes it, and so
	// does OpenStack when it fails.
	Listener net.Listener
	// Poll makes the Stack poll every source itself, every Interval, in
	// Run, feeding the endpoints and the recording (serve). Without it
	// the owner polls through Server and Sources. Requires Listener.
	Poll bool
	// Record, when not "", records every snapshot of every source to this
	// new file (never overwritten): source 0 is the server, source i the
	// i-th of Sources. locktop replay and report read it.
	Record string
	// Web turns on TLS and authentication for the endpoints
	// (--web.config.file); its zero value serves plain HTTP to anyone.
	Web httpapi.WebConfig
	// QueryText is how much of each session's query text the endpoints
	// and the recording carry (--query-text); the owner's own polls (the
	// screen) keep it all.
	QueryText querytext.Mode
	// History, when not nil, keeps the recent past of every source, as
	// Record does, in memory or in rotating files (package history): the
	// endpoints answer ?at=, /api/report and /api/history from it, and the
	// dashboard rewinds onto it. Its Header is filled in here.
	History *history.Options
	// WaitInterval, when shorter than Interval, is Run's interval while
	// any lock is waited for (serve's --wait-interval).
	WaitInterval time.Duration
	// Log receives what happens beside the owner's own output (a failing
	// poll, a recording that stopped, the HTTP server's errors); nil
	// discards it.
	Log *slog.Logger
}

// SourceConfig names the lock sources beside the PostgreSQL server. The
// flags --redis, --lease-dsn, --lease-sqlite and --source-timeout fill one
// in (sourceFlags.config); a fleet can build one per server.
type SourceConfig struct {
	// Redis is the URL of a Redis holding session mutexes
	// (redis://host:port/db or unix:///path); "" watches none.
	Redis string
	// LeaseDSN is a PostgreSQL database holding lease tables; "" watches
	// the watched server's own lease schema, when it has one.
	LeaseDSN string
	// LeaseSQLite is a SQLite file holding lease tables; "" watches none.
	LeaseSQLite string
	// Timeout bounds each poll of every one of these sources; 0 is
	// defaultSourceTimeout.
	Timeout time.Duration
	// Registry names the keys of every source (--registry); nil is
	// registry.Builtin(), whose advisory names apply only to this
	// project's own sessions.
	Registry *registry.Registry
}

// defaultSourceTimeout is SourceConfig.Timeout's default, and the flag's.
const defaultSourceTimeout = 2 * time.Second

// OpenStack connects to cfg.DSN and opens what cfg asks for. A server that
// cannot be used (bad DSN, unreachable, wrong password), a source that
// cannot be set up (a bad URL) or a recording that cannot be created is
// the operator's to fix: one line, exit code 2. Its errors never carry the
// DSN's password. On failure everything it opened is closed again.
func OpenStack(ctx context.Context, cfg StackConfig) (_ *Stack, err error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// go-redis logs through the Stack's logger, never onto the screen.
	redislog.Install(cfg.Log)
	if cfg.Sources.Timeout == 0 {
		cfg.Sources.Timeout = defaultSourceTimeout
	}
	s := &Stack{cfg: cfg}
	fleet := len(cfg.Targets) > 0
	targets := cfg.Targets
	if !fleet {
		targets = []Target{{DSN: cfg.DSN, Sources: cfg.Sources}}
	}
	for _, t := range targets {
		s.members = append(s.members, newMember(t, cmp.Or(t.Sources.Registry, cfg.Sources.Registry), cfg.Log))
	}
	if cfg.Listener != nil {
		s.closers = append(s.closers, func() { cfg.Listener.Close() })
	}
	defer func() {
		if err != nil {
			s.Close()
			err = s.Redact(err)
		}
	}()
	switch {
	case cfg.Sources.Timeout < 0:
		return nil, usagef("--source-timeout must be positive, not %v", cfg.Sources.Timeout)
	case (cfg.Poll || cfg.Listener != nil || cfg.Record != "") && cfg.Interval <= 0:
		return nil, errors.New("stack: an Interval is required with Poll, Listener or Record")
	case cfg.Poll && cfg.Listener == nil:
		return nil, errors.New("stack: Poll feeds the endpoints: it requires a Listener")
	}

	if err := s.connect(ctx, fleet); err != nil {
		return nil, err
	}
	// The sources in order: each target's server, then the sources beside it.
	var all []source.Source
	var names []string
	for i, m := range s.members {
		t := targets[i]
		if t.Sources.Timeout == 0 {
			t.Sources.Timeout = cfg.Sources.Timeout
		}
		others, err := s.openOthers(ctx, t)
		if err != nil {
			return nil, err
		}
		all = append(all, source.Named(m.sourceName(), m.Poll))
		names = append(names, m.sourceName())
		for _, o := range others {
			if m.name != "" {
				o = serverSource{o, m.name}
			}
			all = append(all, o)
			names = append(names, o.Name())
		}
	}
	others := all[1:]

	// Every answer passes the redactor (the members'), then the recorder:
	// what the owner and the endpoints see is what the file holds.
	var pg ui.Source = s.members[0]
	if cfg.Record != "" {
		if s.w, err = createRecording(cfg.Record, s.Target(), s.Info(), names, cfg.Interval, cfg.QueryText); err != nil {
			return nil, err
		}
		s.closers = append(s.closers, func() {
			if err := s.w.Close(); err != nil {
				s.closeErr = errors.Join(s.closeErr, fmt.Errorf("%s: %w", cfg.Record, err))
			}
		})
		rec := &recorder{w: s.w, log: cfg.Log}
		pg = recordedSource{pg, rec, names[0]}
		for i, o := range others {
			others[i] = recordedOther{o, rec, i + 1}
		}
	}
	if cfg.History != nil {
		o := *cfg.History
		o.Header = recording.Header{Server: s.Target(), Info: s.Info(), Sources: names, Start: time.Now(), Interval: cfg.Interval, Locktop: versionString(), QueryText: cfg.QueryText.String()}
		if s.hist, err = history.New(o); err != nil {
			return nil, exitError{code: exitUsage, err: fmt.Errorf("--history: %w", err)}
		}
		s.closers = append(s.closers, func() { _ = s.hist.Close() })
		rec := &recorder{w: s.hist, log: cfg.Log, what: "history"}
		pg = recordedSource{pg, rec, names[0]}
		for i, o := range others {
			others[i] = recordedOther{o, rec, i + 1}
		}
	}
	s.server, s.others = pg, others

	if cfg.Listener != nil {
		// The endpoints serve the owner's own polls (tee), or the Stack's
		// (Poll): never a second poller.
		s.mo = newMonitoring(s.members, pg.Poll, others, cfg.Poll, cfg.Interval, cfg.QueryText, cfg.Log)
		if s.hist != nil {
			s.mo.keep(s.hist)
		}
		s.server = s.mo
		if !cfg.Poll {
			s.others = make([]source.Source, len(others))
			for i := range others {
				s.others[i] = s.mo.tee(i)
			}
		}
		srvCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		s.stopServing, s.served = stop, make(chan error, 1)
		go func() { s.served <- httpapi.ServeConfig(srvCtx, cfg.Listener, s.mo.handler, cfg.Web, cfg.Log) }()
		cfg.Log.Debug("serving the monitoring endpoints", "addr", cfg.Listener.Addr().String())
	}
	return s, nil
}

// connect connects every target's monitor, at once. The one unnamed
// target must answer (else one line, exit 2, as always); of several, one
// that does not answer is logged and retried at each poll, and only a
// connection string that cannot be parsed at all stops the command.
func (s *Stack) connect(ctx context.Context, fleet bool) error {
	for _, m := range s.members {
		s.closers = append(s.closers, m.Close)
	}
	if !fleet {
		_, err := s.members[0].connect(ctx)
		return err
	}
	errs := make([]error, len(s.members))
	var wg sync.WaitGroup
	for i, m := range s.members {
		wg.Go(func() { _, errs[i] = m.connect(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		var ce *pgsource.ConnectError
		switch {
		case err == nil:
		case errors.As(err, &ce) && ce.Kind == pgsource.KindBadDSN:
			return usagef("target %s: %v", s.members[i].name, err)
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			s.cfg.Log.Warn("target not answering; retrying at each poll", "target", s.members[i].name, "err", err.Error())
		}
	}
	return nil
}

// openMonitor connects the read-only pgsource. A server that cannot be used
// (bad DSN, unreachable, wrong password, no such database) is the caller's
// problem to fix: one line and exit code 2.
func openMonitor(ctx context.Context, dsn string, opts pgsource.Options) (*pgsource.Monitor, error) {
	m, err := pgsource.Connect(ctx, dsn, opts)
	if err != nil {
		var ce *pgsource.ConnectError
		if errors.As(err, &ce) {
			return nil, exitError{code: exitUsage, err: err}
		}
		return nil, err
	}
	return m, nil
}

// openOthers opens the sources cfg.Sources names, each bounded by its
// Timeout: the Redis, the lease tables of LeaseDSN or else of the watched
// database (when it has them; its own small pool, so the monitor's poll
// and health probe never wait for it), and the SQLite file. A source that
// cannot be set up (a bad URL or DSN) is bad usage (exit 2); one that
// fails later shows as that source's error only.
func (s *Stack) openOthers(ctx context.Context, t Target) ([]source.Source, error) {
	c := t.Sources
	var out []source.Source
	add := func(src source.Source, close func()) {
		if c.Registry != nil {
			src = named{src, c.Registry}
		}
		out = append(out, source.WithTimeout(src, c.Timeout))
		if close != nil {
			s.closers = append(s.closers, close)
		}
	}
	if c.Redis != "" {
		r, err := redissource.Open(c.Redis, redissource.Options{})
		if err != nil {
			return nil, usagef("--redis: %v", err)
		}
		add(r, r.Close)
		if s.redis == nil {
			s.redis = r
		}
	}
	leaseDSN, optional := c.LeaseDSN, false
	if leaseDSN == "" && t.Name != "" {
		// Of several targets, the target's own lease tables are read over
		// its monitor connection, when it has one: one connection per
		// target (the two take turns).
		add(leasesource.Postgres("lease", s.member(t.Name).leaseQuerier(), "", true), nil)
		if c.LeaseSQLite != "" {
			add(leasesource.SQLite("lease-sqlite", c.LeaseSQLite), nil)
		}
		return out, nil
	}
	if leaseDSN == "" {
		leaseDSN, optional = t.DSN, true
	}
	pc, err := pgsource.Config(leaseDSN, pgsource.Options{})
	if err != nil {
		return nil, usagef("--lease-dsn: %v", err)
	}
	pc.MaxConns = 1
	pc.ConnConfig.RuntimeParams["application_name"] = pgsource.ApplicationName + ".lease"
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, usagef("--lease-dsn: %v", err)
	}
	add(leasesource.Postgres("lease", pool, "", optional), pool.Close)
	if c.LeaseSQLite != "" {
		add(leasesource.SQLite("lease-sqlite", c.LeaseSQLite), nil)
	}
	return out, nil
}

// member is the target called name.
func (s *Stack) member(name string) *member {
	for _, m := range s.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// Server is the watched server as the owner polls it: its errors carry no
// password, and each answer is recorded and published to the endpoints
// when the Stack has them. The dashboard's Options.Source.
func (s *Stack) Server() ui.Source { return s.server }

// Sources are the other lock sources as the owner polls them, in the
// order SourceConfig lists them (Redis, lease tables, SQLite), each
// bounded by its timeout, recorded and published as Server is. The
// dashboard's Options.Sources.
func (s *Stack) Sources() []source.Source { return s.others }

// PollAll polls the server and every other source once, at once, for
// model.Merge: the server's part first, named "postgres" (with several
// targets, "NAME/postgres" for each).
func (s *Stack) PollAll(ctx context.Context) []model.Part {
	return source.PollAll(ctx, append([]source.Source{source.Named(s.members[0].apiName(), s.server.Poll)}, s.others...))
}

// Named waits for the names of other databases' relations that the last
// poll asked for (pgsource.Monitor.Named), on every target, and reports
// whether there were any: a poll after it shows them.
func (s *Stack) Named(ctx context.Context) bool {
	waited := false
	for _, m := range s.members {
		if mon := m.current(); mon != nil {
			w, _ := mon.Named(ctx)
			waited = waited || w
		}
	}
	return waited
}

// Info describes the watched server (the first target), as the monitor
// found it on connecting.
func (s *Stack) Info() model.ServerInfo { return s.members[0].Info() }

// Target names the watched server for people and logs:
// user@host:port/database, never the password; with several targets,
// their names.
func (s *Stack) Target() string {
	if s.members[0].name == "" {
		return s.members[0].red.target()
	}
	return strconv.Itoa(len(s.members)) + " servers: " + strings.Join(s.Targets(), ", ")
}

// Targets are the names of the watched targets, in order; none for the one
// unnamed target.
func (s *Stack) Targets() []string {
	if s.members[0].name == "" {
		return nil
	}
	out := make([]string, len(s.members))
	for i, m := range s.members {
		out[i] = m.name
	}
	return out
}

// Redact returns err with every target's DSN's password removed from its
// text.
func (s *Stack) Redact(err error) error {
	for _, m := range s.members {
		err = m.red.err(err)
	}
	return err
}

// Terminate ends backend pid on the watched server (the dashboard's
// --allow-terminate), its error redacted.
func (s *Stack) Terminate(ctx context.Context, pid int32) error {
	return s.members[0].Terminate(ctx, pid)
}

// ForceRelease deletes the hold of Redis lock name (its full key) through
// the lock library's audited path, recording locktop as the actor (the
// dashboard breaking a deadlock, with --allow-terminate). Nil when no Redis
// is watched.
func (s *Stack) ForceRelease() func(ctx context.Context, name string) error {
	if s.redis == nil {
		return nil
	}
	return func(ctx context.Context, name string) error {
		// The source keeps its own URL's password out of its errors.
		return s.redis.ForceRelease(ctx, name, "locktop", "breaking a deadlock from the dashboard")
	}
}

// Observers are what lock users in this process report to, so that the
// endpoints' metrics count their acquires (the embedded simulator): none
// without a Listener.
func (s *Stack) Observers() []lockcore.Observer {
	if s.mo == nil {
		return nil
	}
	return []lockcore.Observer{s.mo.met.Observer()}
}

// AddPools adds connection pools to the endpoints' pool metrics (the
// monitor's own is there from the start); without a Listener it does
// nothing.
func (s *Stack) AddPools(pools func() []model.PoolStats) {
	if s.mo != nil {
		s.mo.met.AddPools(pools)
	}
}

// History is the kept past (nil without StackConfig.History).
func (s *Stack) History() *history.History { return s.hist }

// RecordedBytes is the size of the recording so far (0 without one).
func (s *Stack) RecordedBytes() int64 {
	if s.w == nil {
		return 0
	}
	return s.w.Size()
}

// Run polls every source each Interval until ctx ends, keeping the
// endpoints fresh and the recording written (StackConfig.Poll). It
// returns early with the HTTP server's error when serving fails. Without
// Poll it only waits for ctx or the server's failure.
func (s *Stack) Run(ctx context.Context) error {
	if s.mo == nil {
		<-ctx.Done()
		return nil
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	if s.cfg.Poll {
		wg.Go(func() { s.mo.loop(pctx, s.cfg.Interval, s.cfg.WaitInterval) })
	}
	defer wg.Wait()
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.served:
		s.served <- err // for Close
		if err == nil {
			err = errors.New("the HTTP server stopped")
		}
		return err
	}
}

// Close stops serving (letting running requests finish, within
// httpapi.ShutdownTimeout) and closes the recording, the sources and the
// monitor, in the reverse order of opening. It returns what went wrong
// on the way out (the HTTP server's error, a recording that could not be
// completed); calling it again returns the same.
func (s *Stack) Close() error {
	s.closeOnce.Do(func() {
		if s.stopServing != nil {
			s.stopServing()
			if err := <-s.served; err != nil {
				s.closeErr = errors.Join(s.closeErr, err)
			}
		}
		for i := len(s.closers) - 1; i >= 0; i-- {
			s.closers[i]()
		}
	})
	return s.closeErr
}
