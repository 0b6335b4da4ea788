package lockcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/model"
)

const (
	// DefaultTimeout is how long a blocking acquire waits unless told
	// otherwise (seed 000's 15 seconds).
	DefaultTimeout = 15 * time.Second
	// DefaultApplicationName marks lock connections in pg_stat_activity.
	DefaultApplicationName = "locktop.lock"

	// cleanupTimeout bounds the unlock after a failed acquire and the unlock
	// of a release; both run on a fresh context so a cancelled caller cannot
	// leave a lock behind.
	cleanupTimeout = 5 * time.Second
	// backstop is how long after the server's lock_timeout should have fired
	// the client stops waiting on its own (a server that never answers).
	backstop = 2 * time.Second
	// sessionMargin is the most a connection wait may take before an acquire
	// with the default timeout needs a lock_timeout of its own.
	sessionMargin = 50 * time.Millisecond
	// ctxMargin is how far before a context's deadline the server is told
	// to give up (at most a tenth of the time left).
	ctxMargin = 50 * time.Millisecond
	// cancelGrace bounds the cancel request, and the wait for the server's
	// answer after it, once the caller's context has ended.
	cancelGrace = time.Second
	// maxLockTimeout is the largest lock_timeout PostgreSQL accepts (ms).
	maxLockTimeout = 1<<31 - 1
)

// Service takes session-scoped advisory locks on dedicated connections from
// one pool. It is safe for concurrent use. See the package documentation for
// the rules every method follows.
type Service struct {
	pool    *pgxpool.Pool
	timeout time.Duration
	// sessionTimeout is the lock_timeout (ms) set on each lock connection's
	// session: the default timeout less a margin for the connection wait.
	sessionTimeout int64
	appName        string
	db             string // the database's identity, for reentrancy
	shared         bool   // WithSharedPool: no session lock_timeout
	observers      []Observer
	log            *slog.Logger

	waiting  atomic.Int64 // goroutines waiting for a pooled connection
	held     atomic.Int64 // locks held now
	phantoms atomic.Int64 // phantom locks cleaned up, cumulative
}

// Option configures a Service.
type Option func(*Service)

// WithDefaultTimeout sets the timeout of With and Acquire calls that do not
// give one, and of the wait for a connection in TryWith. The default is 15s.
func WithDefaultTimeout(d time.Duration) Option {
	return func(s *Service) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithApplicationName sets the application_name of lock connections, so a
// monitor can tell them apart. The default is "locktop.lock"; "" leaves the
// pool's own setting alone. It is set once per connection, the first time
// the Service uses it.
func WithApplicationName(name string) Option {
	return func(s *Service) { s.appName = name }
}

// WithSharedPool says the pool also serves other work, so the Service must
// not leave session settings on its connections: each lock statement sets
// lock_timeout for itself alone, instead of the Service setting it once per
// connection. That costs the server a setting change per lock, measurable
// only under heavy contention. application_name is still set unless
// WithApplicationName("") is given too.
func WithSharedPool() Option {
	return func(s *Service) { s.shared = true }
}

// WithObserver adds an observer of every lock event. It may be given more
// than once.
func WithObserver(o Observer) Option {
	return func(s *Service) {
		if o != nil {
			s.observers = append(s.observers, o)
		}
	}
}

// WithLogger sets where phantom unlocks and failed releases are logged. The
// default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *Service) {
		if l != nil {
			s.log = l
		}
	}
}

// New returns a Service that takes its lock connections from pool. A pool of
// its own, apart from the pool the critical sections do their work on, means
// a body waiting for a work connection can never starve a lock holder.
func New(pool *pgxpool.Pool, opts ...Option) *Service {
	s := &Service{pool: pool, db: databaseID(pool), timeout: DefaultTimeout, appName: DefaultApplicationName, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	if !s.shared {
		s.sessionTimeout = (s.timeout - min(s.timeout/100, sessionMargin)).Milliseconds()
	}
	return s
}

// Pool returns the pool lock connections come from.
func (s *Service) Pool() *pgxpool.Pool { return s.pool }

// Held returns the number of locks this Service holds now.
func (s *Service) Held() int64 { return s.held.Load() }

// Phantoms returns how many phantom locks (bug #17686) have been cleaned up.
func (s *Service) Phantoms() int64 { return s.phantoms.Load() }

// PoolStats returns the lock pool's statistics, with the number of acquires
// waiting for a connection right now.
func (s *Service) PoolStats(name string) model.PoolStats {
	ps := PoolStats(name, s.pool)
	ps.Waiting = s.waiting.Load()
	return ps
}

// PoolStats converts pgxpool's statistics. Waiting is left zero: pgxpool
// does not count waiters, so owners of a pool add their own count.
func PoolStats(name string, p *pgxpool.Pool) model.PoolStats {
	st := p.Stat()
	return model.PoolStats{
		Name:      name,
		MaxConns:  st.MaxConns(),
		Total:     st.TotalConns(),
		InUse:     st.AcquiredConns(),
		Idle:      st.IdleConns(),
		Acquires:  st.AcquireCount(),
		Empty:     st.EmptyAcquireCount(),
		Canceled:  st.CanceledAcquireCount(),
		WaitTotal: st.AcquireDuration(),
	}
}

// With runs fn while holding key, waiting up to the default timeout for it.
// fn gets a context that carries the key (for reentrancy detection) and is
// cancelled when fn returns. With returns fn's error, or the acquire's
// *AdvisoryLockError, or the release's error if fn succeeded and the lock
// turned out lost (ErrLost). A panic in fn releases the lock and resumes.
func (s *Service) With(ctx context.Context, key Key, fn func(ctx context.Context) error) error {
	return s.WithTimeout(ctx, key, s.timeout, fn)
}

// WithTimeout is With with its own timeout.
func (s *Service) WithTimeout(ctx context.Context, key Key, timeout time.Duration, fn func(ctx context.Context) error) error {
	l, err := s.acquire(ctx, key, timeout, false)
	if err != nil {
		return err
	}
	return l.run(ctx, fn)
}

// TryWith runs fn only if key can be taken without waiting for another
// holder. It reports acquired=false with a nil error when the key is held
// elsewhere or already held in ctx. Waiting for a pooled connection still
// counts against the default timeout; running out of it is an error.
func (s *Service) TryWith(ctx context.Context, key Key, fn func(ctx context.Context) error) (acquired bool, err error) {
	l, err := s.acquire(ctx, key, s.timeout, true)
	if l == nil {
		if errors.Is(err, ErrReentrant) {
			return false, nil
		}
		return false, err
	}
	return true, l.run(ctx, fn)
}

// Acquire takes key and returns the held Lock, for holds that span several
// steps (seed 002). The caller must call Release. A timeout <= 0 means the
// default timeout.
func (s *Service) Acquire(ctx context.Context, key Key, timeout time.Duration) (*Lock, error) {
	if timeout <= 0 {
		timeout = s.timeout
	}
	return s.acquire(ctx, key, timeout, false)
}

// TryAcquire takes key if no one else holds it and returns nil, nil if
// someone does or ctx already holds it.
func (s *Service) TryAcquire(ctx context.Context, key Key) (*Lock, error) {
	l, err := s.acquire(ctx, key, s.timeout, true)
	if errors.Is(err, ErrReentrant) {
		return nil, nil
	}
	return l, err
}

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

// acquire takes key. A try reports "not acquired" as (nil, nil) and a
// reentrant try as (nil, ErrReentrant error) so the caller can tell them
// apart.
func (s *Service) acquire(ctx context.Context, key Key, timeout time.Duration, try bool) (*Lock, error) {
	op := "acquire"
	if try {
		op = "try"
	}
	if held(ctx, s.db, key) != nil {
		s.emit(Event{Kind: EventReentrant, Key: key, Blocking: !try})
		return nil, &AdvisoryLockError{Key: key, Op: op, Err: ErrReentrant}
	}
	start := time.Now()
	// The caller's deadline, if sooner, bounds the wait too, a little before
	// it, so the server's lock_timeout fires first and a deadline ends as a
	// clean timeout rather than a cancel request.
	deadline := start.Add(timeout)
	if d, ok := ctx.Deadline(); ok {
		d = d.Add(-min(time.Until(d)/10, ctxMargin))
		if d.Before(deadline) {
			deadline = d
		}
	}
	s.emit(Event{Kind: EventAttempt, Key: key, Blocking: !try})
	fail := func(pid uint32, err error) (*Lock, error) {
		kind := EventFailed
		switch {
		case errors.Is(err, ErrTimeout):
			kind = EventTimeout
		case errors.Is(err, context.Canceled):
			kind = EventCanceled
		}
		w := time.Since(start)
		s.emit(Event{Kind: kind, Key: key, Blocking: !try, Wait: w, PID: pid, Err: err})
		return nil, &AdvisoryLockError{Key: key, Op: op, Waited: w, Err: err}
	}

	// The wait for a connection counts against the timeout.
	actx, cancel := context.WithDeadline(ctx, deadline)
	s.waiting.Add(1)
	conn, err := s.pool.Acquire(actx)
	s.waiting.Add(-1)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != context.Canceled {
			return fail(0, fmt.Errorf("%w (waiting for a connection from the lock pool)", ErrTimeout))
		}
		return fail(0, ctxErr(ctx, err))
	}
	pid := conn.Conn().PgConn().PID()
	if err := s.prepareSession(ctx, conn, deadline); err != nil {
		destroy(conn)
		return fail(pid, ctxErr(ctx, err))
	}

	var granted bool
	if try {
		err = s.query(ctx, conn, deadline, func(qctx context.Context) error {
			return conn.QueryRow(qctx, sqlFor(key).try, keyArgs(key)...).Scan(&granted)
		})
	} else {
		remaining := time.Until(deadline).Milliseconds()
		if remaining < 1 {
			conn.Release() // nothing was sent for the lock: the connection is clean
			return fail(pid, ErrTimeout)
		}
		err = s.query(ctx, conn, deadline.Add(backstop), func(qctx context.Context) error {
			if s.sessionTimeout > 0 && remaining >= s.sessionTimeout && remaining-s.sessionTimeout <= sessionMargin.Milliseconds() {
				// The session's lock_timeout (set by prepareSession) ends
				// the wait just before the deadline: the bare statement.
				_, err := conn.Exec(qctx, sqlFor(key).lock, keyArgs(key)...)
				return err
			}
			// Another wait, shorter or longer: lock_timeout set in the
			// same statement, local to its implicit transaction. The
			// WHERE clause runs before the select list.
			lt := strconv.FormatInt(min(remaining, maxLockTimeout), 10)
			_, err := conn.Exec(qctx, sqlFor(key).lockWithin, keyArgs(key, lt)...)
			return err
		})
		granted = err == nil
	}

	if err == nil && try && !granted {
		conn.Release() // a clean "no": nothing to undo
		s.emit(Event{Kind: EventSkipped, Key: key, Wait: time.Since(start), PID: pid})
		return nil, nil
	}
	if err != nil {
		s.cleanupFailed(conn, key)
		var pgErr *pgconn.PgError
		if ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: lock_timeout fired
			return fail(pid, ErrTimeout)
		}
		return fail(pid, ctxErr(ctx, err))
	}

	wait := time.Since(start)
	s.held.Add(1)
	lctx, lcancel := context.WithCancel(withHeld(ctx, s.db, key, pid))
	l := &Lock{s: s, key: key, conn: conn, pid: pid, ctx: lctx, cancel: lcancel, at: time.Now(), blocking: !try}
	s.emit(Event{Kind: EventAcquired, Key: key, Blocking: !try, Wait: wait, PID: pid})
	return l, nil
}

// ctxErr explains a failure in terms of ctx when ctx has ended (a deadline
// is a timeout, and says so both ways), else returns err.
func ctxErr(ctx context.Context, err error) error {
	switch ctx.Err() {
	case nil:
		if pgconn.Timeout(err) { // the socket deadline: the server never answered
			return fmt.Errorf("%w: %w", ErrTimeout, err)
		}
		return err
	case context.DeadlineExceeded:
		return fmt.Errorf("%w: %w", ErrTimeout, context.DeadlineExceeded)
	default:
		return ctx.Err()
	}
}

// sessionState is what a Service has set on a connection's session, kept in
// the connection's CustomData (a checked-out connection has one user).
type sessionState struct{ lockTimeout int64 }

const sessionStateKey = "lockcore.session"

// prepareSession sets application_name and a session lock_timeout of
// s.sessionTimeout on a connection the first time this Service (or one with
// another timeout) uses it: one round trip per connection, after which a
// lock with the usual timeout is a bare pg_advisory_lock. A session setting,
// rather than one in each lock statement, spares the server a GUC change and
// undo per lock, which is measurable under contention.
func (s *Service) prepareSession(ctx context.Context, conn *pgxpool.Conn, deadline time.Time) error {
	pc := conn.Conn().PgConn()
	cd := pc.CustomData()
	st, _ := cd[sessionStateKey].(sessionState)
	needApp := s.appName != "" && pc.ParameterStatus("application_name") != s.appName
	if !needApp && st.lockTimeout == s.sessionTimeout {
		return nil
	}
	app := s.appName
	if app == "" {
		app = pc.ParameterStatus("application_name")
	}
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var err error
	if s.sessionTimeout == 0 { // a shared pool: application_name only
		if st.lockTimeout != 0 { // a non-shared Service left its lock_timeout here
			if _, err := conn.Exec(actx, "RESET lock_timeout"); err != nil {
				return err
			}
		}
		_, err = conn.Exec(actx, "SELECT set_config('application_name', $1, false)", app)
	} else {
		_, err = conn.Exec(actx, "SELECT set_config('application_name', $1, false), set_config('lock_timeout', $2, false)",
			app, strconv.FormatInt(s.sessionTimeout, 10))
	}
	if err != nil {
		return err
	}
	cd[sessionStateKey] = sessionState{lockTimeout: s.sessionTimeout}
	return nil
}

// query runs one lock statement so that cancelling ctx stops it on the
// server. pgx on its own would cut the socket, leaving the backend queued on
// the lock until its lock_timeout; a cancel request makes the server end the
// wait now. If ctx ends at any point the statement counts as failed, even if
// it succeeded, because the cancel may have raced with the grant.
func (s *Service) query(ctx context.Context, conn *pgxpool.Conn, deadline time.Time, run func(context.Context) error) error {
	qctx, clear := bounded(ctx, conn, deadline)
	defer clear()
	if ctx.Done() == nil { // a context that can never end: nothing to watch
		return run(qctx)
	}
	// A cancel request that reaches an idle backend is dropped by the
	// server, so an ended context must not send the statement at all.
	if err := ctx.Err(); err != nil {
		return err
	}
	sent := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(sent)
		// Stop waiting for the server soon in any case: a server that does
		// not answer the cancel does not hold the caller up past the grace.
		_ = conn.Conn().PgConn().Conn().SetDeadline(time.Now().Add(2 * cancelGrace))
		cctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		defer cancel()
		_ = conn.Conn().PgConn().CancelRequest(cctx) // failing to cancel only means waiting for the deadline
	})
	err := run(qctx)
	if !stop() {
		<-sent // the cancel request is out: no goroutine outlives the call
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// bounded returns a context for a statement on conn that can never be
// cancelled (so pgx watches nothing), with the statement bounded instead by
// a deadline on the connection's socket: a server that stops answering ends
// in a timeout error, never a hang. That spares each statement a context,
// a timer and pgx's context watcher. clear lifts the deadline.
func bounded(ctx context.Context, conn *pgxpool.Conn, deadline time.Time) (qctx context.Context, clear func()) {
	qctx = ctx
	if ctx.Done() != nil {
		qctx = context.WithoutCancel(ctx)
	}
	nc := conn.Conn().PgConn().Conn()
	_ = nc.SetDeadline(deadline)
	return qctx, func() { _ = nc.SetDeadline(time.Time{}) }
}

// cleanupFailed unlocks key unconditionally on the connection of a failed
// acquire, counts a phantom lock if there was one (bug #17686), and closes
// the connection rather than returning it to the pool.
func (s *Service) cleanupFailed(conn *pgxpool.Conn, key Key) {
	defer destroy(conn)
	if conn.Conn().IsClosed() {
		return // the session is gone, and its locks with it
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var was bool
	if err := conn.QueryRow(ctx, sqlFor(key).unlock, keyArgs(key)...).Scan(&was); err != nil {
		return // closing the connection ends the session and frees whatever it held
	}
	if was {
		s.phantoms.Add(1)
		s.emit(Event{Kind: EventPhantom, Key: key, PID: conn.Conn().PgConn().PID()})
		s.log.Warn("advisory lock was granted as its acquire failed; unlocked it (phantom lock, cf. PostgreSQL bug #17686)",
			"key", key.String(), "pid", conn.Conn().PgConn().PID())
	}
}

// destroy takes a connection out of the pool and closes it, so it is never
// handed out again. Hijacking, rather than closing and releasing, leaves
// the pool's counts right at once (pgxpool destroys a released closed
// connection in the background), so callers that check for leaks after a
// lost lock see none.
func destroy(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = conn.Hijack().Close(ctx)
}

// Lock is a held session lock. Release it exactly once; further calls do
// nothing.
type Lock struct {
	s        *Service
	key      Key
	conn     *pgxpool.Conn
	pid      uint32
	ctx      context.Context
	cancel   context.CancelFunc
	at       time.Time
	blocking bool

	once sync.Once
	err  error
}

// Key returns the key held.
func (l *Lock) Key() Key { return l.key }

// Fence returns the lock's fencing token: strictly greater than the fence
// of every earlier grant of the same key in the same database, or 0 when
// fencing is off. (Stub: minted by the loss-detection work of issue 9.)
func (l *Lock) Fence() int64 { return 0 }

// Done is closed once the lock is released or lost.
func (l *Lock) Done() <-chan struct{} { return l.ctx.Done() }

// Err is nil while the lock is held, wraps ErrLost once it is lost, and is
// ErrReleased after Release.
func (l *Lock) Err() error {
	if l.ctx.Err() != nil {
		return ErrReleased
	}
	return nil
}

// FenceOf returns the fence of key as held in ctx (a body's context or
// Lock.Context), if ctx holds it.
func FenceOf(ctx context.Context, key Key) (int64, bool) {
	if h := held(ctx, "", key); h != nil {
		return 0, true
	}
	return 0, false
}

// PID returns the process id of the backend whose session holds the lock.
func (l *Lock) PID() uint32 { return l.pid }

// Context returns a context that carries the held key, so that a nested
// acquire of the same key fails with ErrReentrant. It is derived from the
// acquire's context and is cancelled when the lock is released.
func (l *Lock) Context() context.Context { return l.ctx }

// Release unlocks and returns the connection to the pool. It runs on a
// fresh short context built from ctx's values only, so a cancelled ctx still
// releases. If the unlock fails the connection is closed, which frees the
// lock on the server; if it shows the lock was no longer held, Release
// returns an error wrapping ErrLost.
func (l *Lock) Release(ctx context.Context) error {
	l.once.Do(func() { l.err = l.release(ctx) })
	return l.err
}

func (l *Lock) release(ctx context.Context) error {
	defer l.cancel()
	defer l.s.held.Add(-1)
	held := time.Since(l.at)
	rctx, clear := bounded(ctx, l.conn, time.Now().Add(cleanupTimeout))
	var was bool
	err := l.conn.QueryRow(rctx, sqlFor(l.key).unlock, keyArgs(l.key)...).Scan(&was)
	clear()
	if err == nil && was {
		l.conn.Release()
		l.s.emit(Event{Kind: EventReleased, Key: l.key, Blocking: l.blocking, Held: held, PID: l.pid})
		return nil
	}
	destroy(l.conn)
	if err == nil {
		err = ErrLost
	} else {
		err = fmt.Errorf("%w: %w", ErrLost, err)
	}
	l.s.emit(Event{Kind: EventLost, Key: l.key, Blocking: l.blocking, Held: held, PID: l.pid, Err: err})
	l.s.log.Warn("advisory lock lost while held", "key", l.key.String(), "pid", l.pid, "err", err)
	return &AdvisoryLockError{Key: l.key, Op: "release", Err: err}
}

// run calls fn under the lock and releases it afterwards, also when fn
// panics (the panic then carries on up the stack).
func (l *Lock) run(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if rerr := l.Release(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(l.ctx)
}

// heldKey is one link of the list of keys a context holds: advisory locks
// are per database, so the key is qualified by the database's identity.
type heldKey struct {
	db   string
	key  Key
	pid  uint32
	next *heldKey
}

type heldCtxKey struct{}

// held finds key in ctx's held list; db "" matches any database.
func held(ctx context.Context, db string, key Key) *heldKey {
	for h, _ := ctx.Value(heldCtxKey{}).(*heldKey); h != nil; h = h.next {
		if h.key == key && (db == "" || h.db == db) {
			return h
		}
	}
	return nil
}

func withHeld(ctx context.Context, db string, key Key, pid uint32) context.Context {
	next, _ := ctx.Value(heldCtxKey{}).(*heldKey)
	return context.WithValue(ctx, heldCtxKey{}, &heldKey{db: db, key: key, pid: pid, next: next})
}

// Holds reports whether ctx carries key as held by a lock of this package
// (in any database).
func Holds(ctx context.Context, key Key) bool { return held(ctx, "", key) != nil }

// HolderPID returns the backend pid whose session holds key, if ctx (a
// body's context or Lock.Context) holds it.
func HolderPID(ctx context.Context, key Key) (uint32, bool) {
	if h := held(ctx, "", key); h != nil {
		return h.pid, true
	}
	return 0, false
}

// databaseID names the database a pool's connections reach, so that
// reentrancy is judged per database, as the locks themselves are.
func databaseID(p *pgxpool.Pool) string {
	cc := p.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
}

// statements holds the SQL for one key shape.
type statements struct{ lock, lockWithin, try, unlock, xact, tryXact string }

var (
	pairSQL = statements{
		lock:       "SELECT pg_advisory_lock($1::int4, $2::int4)",
		lockWithin: "SELECT pg_advisory_lock($1::int4, $2::int4) WHERE set_config('lock_timeout', $3, true) IS NOT NULL",
		try:        "SELECT pg_try_advisory_lock($1::int4, $2::int4)",
		unlock:     "SELECT pg_advisory_unlock($1::int4, $2::int4)",
		xact:       "SELECT pg_advisory_xact_lock($1::int4, $2::int4)",
		tryXact:    "SELECT pg_try_advisory_xact_lock($1::int4, $2::int4)",
	}
	int64SQL = statements{
		lock:       "SELECT pg_advisory_lock($1::int8)",
		lockWithin: "SELECT pg_advisory_lock($1::int8) WHERE set_config('lock_timeout', $2, true) IS NOT NULL",
		try:        "SELECT pg_try_advisory_lock($1::int8)",
		unlock:     "SELECT pg_advisory_unlock($1::int8)",
		xact:       "SELECT pg_advisory_xact_lock($1::int8)",
		tryXact:    "SELECT pg_try_advisory_xact_lock($1::int8)",
	}
)

func sqlFor(k Key) *statements {
	if k.pair {
		return &pairSQL
	}
	return &int64SQL
}

// keyArgs returns the statement arguments for k followed by extra.
func keyArgs(k Key, extra ...any) []any {
	if k.pair {
		return append([]any{k.hi, k.lo}, extra...)
	}
	return append([]any{k.Int64()}, extra...)
}
