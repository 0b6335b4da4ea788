package lockcore

import (
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/locktop/locktop/model"
)

const (
	// DefaultWait is how long a blocking acquire waits unless told
	// otherwise (Wait).
	DefaultWait = 15 * time.Second
	// DefaultApplicationName marks lock connections in pg_stat_activity.
	DefaultApplicationName = "locktop.lock"
	// DefaultFenceSchema and DefaultFenceSequence name the sequence fencing
	// tokens are drawn from: lockcore.fence.
	DefaultFenceSchema   = "lockcore"
	DefaultFenceSequence = "fence"
)

// DefaultKeepAlive is the TCP keepalive of lock connections: a holder whose
// server stops answering without closing the connection (a cable pulled, a
// host gone) learns of the loss within Idle + Interval*Count, 10 seconds.
var DefaultKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 5}

// Service takes session-scoped advisory locks on dedicated connections from
// one pool. It is safe for concurrent use. See the package documentation for
// the rules every method follows.
type Service struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	// sessionTimeout is the lock_timeout (ms) set on each lock connection's
	// session: the default timeout less a margin for the connection wait.
	sessionTimeout int64
	appName        string // application_name of lock connections, with the owner id
	baseApp        string // the same without it ("": leave application_name alone)
	owner          string
	db             atomic.Pointer[string] // the database's identity (database.go), once known
	shared         bool                   // SharedPool: no session lock_timeout
	keepAlive      net.KeepAliveConfig
	observers      []Observer
	log            *slog.Logger
	maxAttempts    int      // connections one acquire may try when pooled ones turn out dead
	starter        *starter // starts the watches of held locks
	local          *locals  // the in-process hand-off; nil when off

	// Fencing: seq is the quoted sequence name, "" when fencing is off.
	seq, seqSchema string
	seqReady       atomic.Bool   // the sequence is known to exist
	seqGate        chan struct{} // one creation at a time
	pair, single   statements    // the SQL for two-int and one-bigint keys

	waiting  atomic.Int64 // goroutines waiting for a pooled connection
	held     atomic.Int64 // locks held now
	phantoms atomic.Int64 // phantom locks cleaned up, cumulative
}

// config collects the options before New builds the Service.
type config struct {
	timeout        time.Duration
	appName        string
	owner          string
	shared         bool
	keepAlive      net.KeepAliveConfig
	observers      []Observer
	log            *slog.Logger
	fencing        bool
	schema, seqRel string
	handOffs       int
	handOffHold    time.Duration
}

// Option configures a Service. Wait(d) is one too: the wait of With and
// Acquire calls that give none, and of the wait for a connection in
// TryWith (DefaultWait, 15s, by default).
type Option interface{ apply(*config) }

// option is an Option that is a function.
type option func(*config)

func (o option) apply(c *config) { o(c) }

// ApplicationName sets the application_name of lock connections, so a
// monitor can tell them apart; the owner id follows it
// (model.AppWithOwner). The default is DefaultApplicationName; "" leaves
// the pool's own setting alone (and the owner id unseen). It is set once
// per connection, the first time the Service uses it.
func ApplicationName(name string) Option {
	return option(func(c *config) { c.appName = name })
}

// OwnerID sets the owner id the Service stamps on its lock connections'
// application_name and reports as Lock.Owner. The default is the
// process's, Owner().
func OwnerID(id string) Option {
	return option(func(c *config) {
		if id != "" {
			c.owner = id
		}
	})
}

// SharedPool says the pool also serves other work, so the Service must not
// leave session settings on its connections: each lock statement sets
// lock_timeout (and, with fencing, synchronous_commit) for itself alone,
// instead of the Service setting them once per connection. That costs the server a setting change per lock, measurable
// only under heavy contention. application_name is still set unless
// ApplicationName("") is given too.
func SharedPool() Option {
	return option(func(c *config) { c.shared = true })
}

// Observe adds an observer of every lock event. It may be given more than
// once.
func Observe(o Observer) Option {
	return option(func(c *config) {
		if o != nil {
			c.observers = append(c.observers, o)
		}
	})
}

// Logger sets where lost locks, phantom unlocks and failed releases are
// logged. The default is slog.Default().
func Logger(l *slog.Logger) Option {
	return option(func(c *config) {
		if l != nil {
			c.log = l
		}
	})
}

// KeepAlive sets the TCP keepalive of lock connections (set once per
// connection; Unix sockets need none). It bounds how long a holder takes to
// learn that a silent network lost its lock: Idle + Interval*Count. The
// default is DefaultKeepAlive; Enable false leaves the pool's dialer
// settings alone.
func KeepAlive(k net.KeepAliveConfig) Option {
	return option(func(c *config) { c.keepAlive = k })
}

// NoFencing turns fencing tokens off: Lock.Fence and FenceOf report 0, and
// the Service creates nothing in the database and sends the bare lock
// statements. Use it for a database that must not get new objects, or a
// connection that cannot write (a read-only role, a standby).
func NoFencing() Option {
	return option(func(c *config) { c.fencing = false })
}

// FenceSequence sets the sequence fencing tokens are drawn from (default
// lockcore.fence). Every Service that locks the same keys in a database
// must use the same sequence, or fences of different Services do not
// compare. A sequence that exists must be logged, with CACHE 1, a positive
// increment and NO CYCLE, or acquires fail with ErrFencing.
func FenceSequence(schema, name string) Option {
	return option(func(c *config) {
		if schema != "" && name != "" {
			c.schema, c.seqRel = schema, name
		}
	})
}

// New returns a Service that takes its lock connections from pool. A pool of
// its own, apart from the pool the critical sections do their work on, means
// a body waiting for a work connection can never starve a lock holder.
//
// With fencing on (the default), the first acquire creates the fencing
// sequence if it does not exist (CREATE SCHEMA IF NOT EXISTS lockcore;
// CREATE SEQUENCE IF NOT EXISTS lockcore.fence), which needs the CREATE
// privilege on the database once; nextval on it needs USAGE on the schema
// and the sequence.
func New(pool *pgxpool.Pool, opts ...Option) *Service {
	c := config{timeout: DefaultWait, appName: DefaultApplicationName, owner: Owner(), log: slog.Default(),
		keepAlive: DefaultKeepAlive, fencing: true, schema: DefaultFenceSchema, seqRel: DefaultFenceSequence,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	base := c.appName
	if c.appName != "" {
		c.appName = model.AppWithOwner(c.appName, c.owner)
	}
	s := &Service{
		pool: pool, timeout: c.timeout, appName: c.appName, baseApp: base, owner: c.owner, shared: c.shared,
		keepAlive: c.keepAlive, observers: c.observers, log: c.log,
		maxAttempts: int(max(pool.Config().MaxConns, 1)) + 1, starter: newStarter(), local: newLocals(c.handOffs, c.handOffHold),
	}
	if !s.shared {
		s.sessionTimeout = (s.timeout - min(s.timeout/100, sessionMargin)).Milliseconds()
	}
	if c.fencing {
		s.seq = pgx.Identifier{c.schema, c.seqRel}.Sanitize()
		s.seqSchema = pgx.Identifier{c.schema}.Sanitize()
		s.seqGate = make(chan struct{}, 1)
	}
	s.pair, s.single = pairStatements(s.seq, s.shared), singleStatements(s.seq, s.shared)
	return s
}

// Pool returns the pool lock connections come from.
func (s *Service) Pool() *pgxpool.Pool { return s.pool }

// Owner returns the owner id the Service stamps on its locks.
func (s *Service) Owner() string { return s.owner }

// Held returns the number of locks this Service holds now (a lost lock no
// longer counts).
func (s *Service) Held() int64 { return s.held.Load() }

// Phantoms returns how many phantom locks (bug #17686) have been cleaned up.
func (s *Service) Phantoms() int64 { return s.phantoms.Load() }

// Waiting returns how many acquires wait for a connection from the pool
// right now (pgxpool does not count its waiters).
func (s *Service) Waiting() int64 { return s.waiting.Load() }

// Fencing reports whether grants carry fencing tokens.
func (s *Service) Fencing() bool { return s.seq != "" }

// emit calls every observer. An observer that panics is logged and
// skipped: a lock library must not leave a lock held because a metrics
// callback failed.
func (s *Service) emit(e Event) {
	for _, o := range s.observers {
		s.call(o, e)
	}
}

func (s *Service) call(o Observer, e Event) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("lockcore observer panicked", "event", e.Kind.String(), "key", e.Key.String(), "panic", fmt.Sprint(r))
		}
	}()
	o(e)
}
