package pgsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/singleflight"

	"github.com/locktop/locktop/internal/connect"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// ApplicationName marks the monitor's connection in pg_stat_activity.
const ApplicationName = "locktop.monitor"

// Options tune a Monitor. Zero values take the defaults.
type Options struct {
	StatementTimeout time.Duration // default 2s
	LockTimeout      time.Duration // default 500ms
	// ConnectTimeout bounds Connect: the connection and the first query.
	// Default: the DSN's connect_timeout, else connect.DefaultTimeout.
	ConnectTimeout time.Duration
	// NamesIdle is how long a connection that names another database's
	// relations stays open unused before it is closed. Default 1 minute.
	NamesIdle time.Duration
	// MaxConns bounds the monitor's pool; default 2 (a poll and a health
	// probe). A collector of many servers sets 1: one connection per
	// server, whatever shares it waiting its turn.
	MaxConns int32
	// ConnBound bounds every connection the monitor keeps open to the
	// server at once: its pool's (MaxConns, cut to the bound) and those
	// that name other databases' relations, one per database, which take
	// what the pool leaves. A database met when the bound is reached keeps
	// its relations unnamed, and Snapshot.Partial says why. 0: no bound
	// beyond MaxConns (one naming connection per database with locks).
	ConnBound int32
	// Registry names the keys; nil: registry.Builtin(), whose names apply
	// only to this project's own sessions.
	Registry *registry.Registry
}

// Monitor polls one server. It is safe for concurrent use, but polls run one
// at a time.
type Monitor struct {
	pool       *pgxpool.Pool
	info       model.ServerInfo
	names      *namer             // relations of other databases
	probes     singleflight.Group // concurrent Probe calls share one probe
	probeLocks *lockcore.Service  // takes the health probe's lock on pool

	pollTimeout time.Duration      // bounds a poll on the client: statement_timeout and a grace
	reg         *registry.Registry // names the keys

	// polling is a one-slot gate: polls run one at a time, and one waiting
	// for its turn gives up when its context ends. It guards the fields
	// below.
	polling chan struct{}
	reader  pglocks.Reader // keeps the last poll's rows and their order
	models  backends       // the last poll's sessions as the model's
	// grants are the last poll's grants, in its order, with when each was
	// first seen; spareGrants is where the next poll lists its own.
	grants, spareGrants []grantSeen
	seenWaits           map[grantID][]int32 // each wait's blockers when first seen
	firstBlocked        []waitBlockers      // track's list of them by row, reused
	keyNames            interner            // the names in grants' and seenWaits' keys
	lastTaken           time.Time
	sessions            sessionState // who held or waited, to tell who ended (ended.go)
	oursMu              sync.Mutex   // guards sessions.ours, which Terminate writes
}

// Connect opens the monitor's connection to dsn ("" means the PG*
// environment variables) and reads what the server is. Errors are
// *ConnectError, with a one-line message fit for an operator.
func Connect(ctx context.Context, dsn string, opts Options) (*Monitor, error) {
	cfg, err := Config(dsn, opts)
	if err != nil {
		return nil, Describe(err)
	}
	cto := cfg.ConnConfig.ConnectTimeout
	cctx, cancel := context.WithTimeout(ctx, cto)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(cctx, cfg)
	if err != nil {
		return nil, Describe(err)
	}
	st := opts.StatementTimeout
	if st <= 0 {
		st = defaultStatementTimeout
	}
	m := &Monitor{pool: pool, pollTimeout: st + pollGrace, polling: make(chan struct{}, 1), reg: cmp.Or(opts.Registry, registry.Builtin()),
		seenWaits: map[grantID][]int32{},
		// The connection is read-only: no fencing sequence to create or draw from.
		probeLocks: lockcore.New(pool, lockcore.SharedPool(), lockcore.ApplicationName(""),
			lockcore.Wait(ProbeTimeout), lockcore.NoFencing())}
	if err := m.readInfo(cctx); err != nil {
		pool.Close()
		return nil, Describe(err)
	}
	m.names = newNamer(cfg.ConnConfig, m.info.Database, opts.NamesIdle, cto+m.pollTimeout)
	if opts.ConnBound > 0 {
		m.names.limit(opts.ConnBound, opts.ConnBound-cfg.MaxConns)
	}
	return m, nil
}

// Config returns the pool configuration of a monitor connection: read-only,
// named, with its timeouts in the start-up packet, at most two connections
// (a poll and a health probe), each connection attempt bounded as package
// connect bounds every connection locktop opens.
func Config(dsn string, opts Options) (*pgxpool.Config, error) {
	cfg, err := connect.PoolConfig(dsn)
	if err != nil {
		return nil, &ConnectError{Kind: KindBadDSN, Err: err}
	}
	if opts.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	}
	st, lt := opts.StatementTimeout, opts.LockTimeout
	if st <= 0 {
		st = defaultStatementTimeout
	}
	if lt <= 0 {
		lt = 500 * time.Millisecond
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["application_name"] = ApplicationName
	rp["default_transaction_read_only"] = "on"
	rp["statement_timeout"] = fmt.Sprint(st.Milliseconds())
	rp["lock_timeout"] = fmt.Sprint(lt.Milliseconds())
	rp["idle_in_transaction_session_timeout"] = fmt.Sprint((10 * st).Milliseconds())
	cfg.MaxConns = 2
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.ConnBound > 0 {
		cfg.MaxConns = min(cfg.MaxConns, opts.ConnBound)
	}
	cfg.MinConns = 0
	// pgxpool would ping a connection idle for a second before each poll:
	// a second statement per poll. Poll retries once instead, on a fresh
	// connection, when the pooled one died while idle.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	return cfg, nil
}

func (m *Monitor) readInfo(ctx context.Context) error {
	var info model.ServerInfo
	err := m.pool.QueryRow(ctx, `SELECT current_setting('server_version'), current_database(), current_user,
		current_setting('max_connections')::int,
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR pg_has_role(current_user, 'pg_monitor', 'MEMBER')`).
		Scan(&info.Version, &info.Database, &info.User, &info.MaxConnections, &info.Privileged)
	if err != nil {
		return err
	}
	if !info.Privileged {
		info.Warning = fmt.Sprintf("role %q lacks pg_monitor: other roles' queries, states and query start times are hidden (GRANT pg_monitor TO %s)", info.User, pgx.Identifier{info.User}.Sanitize())
	}
	m.info = info
	return nil
}

// Info describes the server, as read at Connect.
func (m *Monitor) Info() model.ServerInfo { return m.info }

// Pool returns the monitor's pool (read-only connections), for a health
// probe or for tests.
func (m *Monitor) Pool() *pgxpool.Pool { return m.pool }

// SetLog sends the monitor's log lines (a database whose relations cannot
// be named, once per change) to log; by default they are dropped. Call it
// before the first Poll.
func (m *Monitor) SetLog(log *slog.Logger) { m.names.log = log }

// Named returns once the lookups of relation names that earlier polls
// started have ended (named, not found, or failed), or ctx ends, and
// reports whether there were any: a Poll after it shows every name that
// can be known. A one-shot reader (snapshot) uses it; a dashboard simply
// polls again.
func (m *Monitor) Named(ctx context.Context) (bool, error) { return m.names.wait(ctx) }

// Close ends the lookups of relation names and closes every connection.
func (m *Monitor) Close() {
	m.names.close()
	m.pool.Close()
}

const (
	defaultStatementTimeout = 2 * time.Second
	// pollGrace is how much longer than statement_timeout the client waits
	// for a poll's answer before giving up on a server that stopped
	// answering.
	pollGrace = time.Second
)

// Poll reads the lock table once (one statement) and fills in held times
// and the count of waits that began since the last poll. It waits at most
// statement_timeout and a second for the server. A failed poll returns a
// *ConnectError when the server cannot be reached; the next Poll
// reconnects. Polls run one at a time; one waiting for its turn returns
// ctx's error when ctx ends.
func (m *Monitor) Poll(ctx context.Context) (model.Snapshot, error) {
	select {
	case m.polling <- struct{}{}:
	case <-ctx.Done():
		return model.Snapshot{}, ctx.Err()
	}
	defer func() { <-m.polling }()
	snap, t, err := m.inspect(ctx)
	if err != nil && ctx.Err() == nil && classify(err) == KindLost {
		// The pooled connection died while idle (a restart, a terminated
		// backend): the poll is read-only, so once more on a fresh one.
		snap, t, err = m.inspect(ctx)
	}
	if err != nil {
		return model.Snapshot{}, Describe(err)
	}
	m.track(&snap)
	m.ended(&snap, t.Alive, t.Killed)
	return snap, nil
}

func (m *Monitor) inspect(ctx context.Context) (model.Snapshot, *pglocks.Table, error) {
	ctx, cancel := context.WithTimeout(ctx, m.pollTimeout)
	defer cancel()
	start := time.Now()
	t, err := m.reader.Read(ctx, m.pool)
	if err != nil {
		return model.Snapshot{}, nil, err
	}
	partial := m.names.apply(&t)
	m.models = backends{prev: m.models.byB, byB: make(map[*pglocks.Backend]converted, len(m.models.byB))}
	snap := buildWith(&t, m.reg, &m.models)
	snap.Partial = partial
	snap.Latency = time.Since(start)
	return snap, &t, nil
}

// Terminate ends a backend with pg_terminate_backend. Only the dashboard's
// --allow-terminate calls it, after the operator confirms. The monitor's
// connection is read-only, and pg_terminate_backend is allowed there.
func (m *Monitor) Terminate(ctx context.Context, pid int32) error {
	var ok bool
	if err := m.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil {
		return Describe(err)
	}
	if !ok {
		return errors.New("pg_terminate_backend returned false: no such backend")
	}
	m.terminated(pid)
	return nil
}
