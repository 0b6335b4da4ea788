package cli

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/leasedb"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// member is one target of a Stack: its PostgreSQL monitor, behind the
// redactor of its DSN. The one unnamed target's monitor is connected by
// OpenStack, and a server that cannot be used there ends the command (exit
// 2), as always. A named target of several that does not answer at start
// is connected again at each poll instead: a dead target shows as its own
// failure and never stops the others (only a DSN that cannot be parsed is
// the operator's to fix at once).
type member struct {
	name string // "" for the one unnamed target
	dsn  string
	red  *redactor
	log  *slog.Logger       // the monitor's: relations it could not name
	reg  *registry.Registry // names the target's keys; nil: the built-in names
	max  int32              // Target.MaxConns

	dial sync.Mutex // one connection attempt at a time
	mu   sync.Mutex
	mon  *pgsource.Monitor
}

func newMember(t Target, reg *registry.Registry, log *slog.Logger) *member {
	return &member{name: t.Name, dsn: t.DSN, red: newRedactor(t.DSN), reg: reg, log: log, max: t.MaxConns}
}

// connect connects the monitor unless it is.
func (m *member) connect(ctx context.Context) (*pgsource.Monitor, error) {
	if mon := m.current(); mon != nil {
		return mon, nil
	}
	m.dial.Lock()
	defer m.dial.Unlock()
	if mon := m.current(); mon != nil {
		return mon, nil
	}
	opts := pgsource.Options{Registry: m.reg, ConnBound: m.max}
	if m.name != "" {
		opts.MaxConns = 1 // one connection per target of a fleet
	}
	mon, err := openMonitor(ctx, m.dsn, opts)
	if err != nil {
		return nil, m.red.err(err)
	}
	mon.SetLog(m.log)
	m.mu.Lock()
	m.mon = mon
	m.mu.Unlock()
	return mon, nil
}

// sourceName is the target's server among the sources, as the dashboard
// and a recording name it: "PostgreSQL" for the one unnamed target,
// "NAME/postgres" for a named one.
func (m *member) sourceName() string {
	if m.name == "" {
		return primarySource
	}
	return m.apiName()
}

// apiName is the target's server among the sources of /api/locks:
// "postgres", "NAME/postgres".
func (m *member) apiName() string { return model.SourceName(m.name, pgSource) }

// current is the monitor, nil until it has connected.
func (m *member) current() *pgsource.Monitor {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mon
}

// Poll reads the target's lock table, connecting first if it must; every
// lock of a named target carries the name.
func (m *member) Poll(ctx context.Context) (model.Snapshot, error) {
	mon, err := m.connect(ctx)
	if err != nil {
		return model.Snapshot{}, err
	}
	s, err := mon.Poll(ctx)
	if err != nil {
		return s, m.red.err(err)
	}
	stamp(&s, m.name)
	return s, nil
}

// Info describes the server as the monitor found it on connecting; the
// zero value before it has.
func (m *member) Info() model.ServerInfo {
	if mon := m.current(); mon != nil {
		return mon.Info()
	}
	return model.ServerInfo{}
}

// Probe is the monitor's health probe (connecting first if it must).
func (m *member) Probe(ctx context.Context) error {
	mon, err := m.connect(ctx)
	if err != nil {
		return err
	}
	return m.red.err(mon.Probe(ctx))
}

// Terminate ends backend pid on the target.
func (m *member) Terminate(ctx context.Context, pid int32) error {
	mon, err := m.connect(ctx)
	if err != nil {
		return err
	}
	return m.red.err(mon.Terminate(ctx, pid))
}

// Close closes the monitor, if it connected.
func (m *member) Close() {
	if mon := m.current(); mon != nil {
		mon.Close()
	}
}

// stamp names the target on every lock of s (nothing for the unnamed one).
func stamp(s *model.Snapshot, server string) {
	if server == "" {
		return
	}
	for i := range s.Locks {
		s.Locks[i].Server = server
	}
	for i := range s.Ended {
		s.Ended[i].Server = server
	}
	for i := range s.Audit {
		s.Audit[i].Server = server
	}
}

// serverSource is a source beside a named target's server: its name says
// whose ("b/redis"), and its locks carry the target's name.
type serverSource struct {
	source.Source
	server string
}

func (s serverSource) Name() string { return model.SourceName(s.server, s.Source.Name()) }

// Present is the wrapped source's (source.Present).
func (s serverSource) Present(ctx context.Context) bool { return source.Present(ctx, s.Source) }

func (s serverSource) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := s.Source.Poll(ctx)
	stamp(&snap, s.server)
	return snap, err
}

// leaseQuerier reads the target's own lease tables over its monitor's
// connection (connecting it first if it must).
func (m *member) leaseQuerier() leasedb.Querier { return memberQuerier{m} }

type memberQuerier struct{ m *member }

func (q memberQuerier) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	mon, err := q.m.connect(ctx)
	if err != nil {
		return failedBatch{err}
	}
	return mon.Pool().SendBatch(ctx, b)
}

// failedBatch is a batch that could not be sent: every result is its error.
type failedBatch struct{ err error }

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return failedRow(f) }
func (f failedBatch) Close() error                     { return f.err }
func (f failedBatch) Tx() pgx.Tx                       { return nil }

type failedRow struct{ err error }

func (f failedRow) Scan(...any) error { return f.err }
