package lockcore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/model"
)

const (
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

// sessionState is what a Service has set on a connection, kept in the
// connection's CustomData (a checked-out connection has one user).
type sessionState struct {
	lockTimeout int64
	durable     bool // synchronous_commit on for the session
	keepAlive   bool // TCP keepalive set (or not needed: a Unix socket)
}

const sessionStateKey = "lockcore.session"

// prepareSession readies a connection the first time this Service (or one
// with other settings) uses it: application_name, a session lock_timeout of
// s.sessionTimeout and, with fencing on, synchronous_commit on (see
// statements), in one round trip, after which a lock with the usual timeout
// is a bare lock statement. Session settings, rather than ones in each lock
// statement, spare the server a GUC change and undo per lock, which is
// measurable. A SharedPool Service sets only application_name, and takes
// back the settings another Service left. It also sets the socket's TCP
// keepalive, which bounds how long a silent network can hide a lost lock.
func (s *Service) prepareSession(ctx context.Context, conn *pgxpool.Conn, deadline time.Time) error {
	pc := conn.Conn().PgConn()
	cd := pc.CustomData()
	st, _ := cd[sessionStateKey].(sessionState)
	want := s.appName
	if o := OwnerIn(ctx, s.owner); o != s.owner && want != "" {
		want = model.AppWithOwner(s.baseApp, o) // a task's own lock (WithOwner)
	}
	needApp := want != "" && pc.ParameterStatus("application_name") != want
	needKA := s.keepAlive.Enable && !st.keepAlive
	// A shared Service wants no session settings; a dedicated one wants its
	// lock_timeout and, fencing, a durable commit (one without fencing
	// leaves a durable commit alone: it costs it nothing).
	durable := st.durable
	if s.shared {
		durable = false
	} else if s.seq != "" {
		durable = true
	}
	settled := st.lockTimeout == s.sessionTimeout && st.durable == durable
	if !needApp && !needKA && settled {
		return nil
	}
	if needKA {
		if err := setKeepAlive(pc.Conn(), s.keepAlive); err != nil {
			// Not fatal: the lock works, only a silent network is noticed
			// later (the pool's dialer keepalive, 15s probes by default).
			s.log.Warn("lockcore: TCP keepalive not set on a lock connection", "err", err)
		}
		st.keepAlive = true
		cd[sessionStateKey] = st
	}
	if !needApp && settled {
		return nil
	}
	app := want
	if app == "" {
		app = pc.ParameterStatus("application_name")
	}
	err := s.query(ctx, conn, deadline, func(qctx context.Context) error {
		if s.sessionTimeout == 0 { // a shared pool: application_name only
			if st.lockTimeout != 0 || st.durable { // a dedicated Service left its settings here
				if _, err := conn.Exec(qctx, "RESET lock_timeout; RESET synchronous_commit"); err != nil {
					return err
				}
			}
			_, err := conn.Exec(qctx, "SELECT set_config('application_name', $1, false)", app)
			return err
		}
		sync := "current_setting('synchronous_commit')"
		if durable {
			sync = "set_config('synchronous_commit', 'on', false)"
		}
		_, err := conn.Exec(qctx, "SELECT set_config('application_name', $1, false), set_config('lock_timeout', $2, false), "+sync,
			app, strconv.FormatInt(s.sessionTimeout, 10))
		return err
	})
	if err != nil {
		return err
	}
	st.lockTimeout, st.durable = s.sessionTimeout, durable
	cd[sessionStateKey] = st
	return nil
}

// setKeepAlive sets TCP keepalive on a lock connection's socket (under TLS
// too). A Unix socket needs none: the kernel tells the client at once when
// the server side closes.
func setKeepAlive(nc net.Conn, k net.KeepAliveConfig) error {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	if err := tc.SetKeepAliveConfig(k); err != nil {
		return fmt.Errorf("setting TCP keepalive on the lock connection: %w", err)
	}
	return nil
}

// ensureFence makes sure of the fencing sequence once per Service: a
// look-up that also reads its settings, and if it is missing, CREATE
// SCHEMA and CREATE SEQUENCE IF NOT EXISTS. The look-up comes first because
// CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege even when the
// schema exists. A sequence that exists already is refused unless its
// settings give increasing fences (checkSequence).
func (s *Service) ensureFence(ctx context.Context, conn *pgxpool.Conn, deadline time.Time) error {
	if s.seq == "" || s.seqReady.Load() {
		return nil
	}
	select { // one creation at a time, and the wait for it counts against the timeout
	case s.seqGate <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(deadline)):
		return fmt.Errorf("%w (waiting for the fencing sequence to be created)", ErrTimeout)
	}
	defer func() { <-s.seqGate }()
	if s.seqReady.Load() {
		return nil
	}
	var bad error // the sequence exists but cannot give increasing fences
	err := s.query(ctx, conn, deadline, func(qctx context.Context) error {
		for attempt := 1; ; attempt++ {
			found, err := s.checkSequence(qctx, conn)
			if err != nil || found.exists {
				bad = found.fault(s.seq)
				return err
			}
			if _, err = conn.Exec(qctx, "CREATE SCHEMA IF NOT EXISTS "+s.seqSchema); err == nil {
				_, err = conn.Exec(qctx, "CREATE SEQUENCE IF NOT EXISTS "+s.seq+" AS bigint MINVALUE 1 NO CYCLE CACHE 1")
			}
			// Another session creating the schema or the sequence at the
			// same moment makes CREATE ... IF NOT EXISTS fail on the
			// catalog's unique index: look again (the schema may exist
			// now without the sequence yet).
			if err == nil || attempt == 3 || !createRace(err) || conn.Conn().PgConn().TxStatus() != 'I' || conn.Conn().IsClosed() {
				return err
			}
		}
	})
	if err != nil {
		return s.fenceErr(err)
	}
	if bad != nil {
		return bad
	}
	s.seqReady.Store(true)
	return nil
}

// createRace tells whether err is a CREATE ... IF NOT EXISTS that lost to
// another session creating the same object: unique_violation on a
// catalog index, or duplicate_schema / duplicate_table.
func createRace(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P06" || pe.Code == "42P07")
}

// sequenceSettings is what pg_class and pg_sequence say of the relation
// that fences are to come from.
type sequenceSettings struct {
	exists      bool
	kind        string // relkind: "S" for a sequence
	persistence string // relpersistence: "p" logged, "u" unlogged, "t" temporary
	increment   int64
	cycle       bool
	cache       int64
}

// checkSequence reads the fencing relation's settings, in one statement;
// exists is false if there is no such relation.
func (s *Service) checkSequence(ctx context.Context, conn *pgxpool.Conn) (sequenceSettings, error) {
	var q sequenceSettings
	err := conn.QueryRow(ctx, `SELECT c.relkind::text, c.relpersistence::text,
		coalesce(q.seqincrement, 0), coalesce(q.seqcycle, false), coalesce(q.seqcache, 0)
		FROM pg_class c LEFT JOIN pg_sequence q ON q.seqrelid = c.oid
		WHERE c.oid = to_regclass($1)`, s.seq).Scan(&q.kind, &q.persistence, &q.increment, &q.cycle, &q.cache)
	if errors.Is(err, pgx.ErrNoRows) {
		return q, nil
	}
	q.exists = err == nil
	return q, err
}

// fault explains why fences from sequence seq would not always increase,
// and how to fix it, or returns nil if they would. A cache hands each
// session its own range, so two sessions' fences do not compare; a cycle
// or a negative increment goes back; an unlogged sequence is reset by a
// crash.
func (q sequenceSettings) fault(seq string) error {
	if !q.exists {
		return nil
	}
	if q.kind != "S" {
		return fmt.Errorf("%w: %s is not a sequence; drop it, or name another sequence with lockcore.FenceSequence, or turn fencing off with lockcore.NoFencing()", ErrFencing, seq)
	}
	var faults, fixes []string
	if q.cache != 1 {
		faults, fixes = append(faults, fmt.Sprintf("CACHE %d (each session hands out its own range)", q.cache)), append(fixes, "CACHE 1")
	}
	if q.increment <= 0 {
		faults, fixes = append(faults, fmt.Sprintf("INCREMENT BY %d", q.increment)), append(fixes, "INCREMENT BY 1")
	}
	if q.cycle {
		faults, fixes = append(faults, "CYCLE (it starts again at its minimum)"), append(fixes, "NO CYCLE")
	}
	var fix string
	if len(fixes) > 0 {
		fix = "ALTER SEQUENCE " + seq + " " + strings.Join(fixes, " ")
	}
	if q.persistence != "p" {
		faults = append(faults, "not logged (a crash resets it)")
		if fix != "" {
			fix += "; "
		}
		fix += "ALTER SEQUENCE " + seq + " SET LOGGED"
	}
	if len(faults) == 0 {
		return nil
	}
	return fmt.Errorf("%w: sequence %s cannot give increasing fences: %s; fix it with: %s, or name another sequence with lockcore.FenceSequence, or turn fencing off with lockcore.NoFencing()",
		ErrFencing, seq, strings.Join(faults, ", "), fix)
}

// fenceErr explains an error of the fencing sequence, or returns err as it
// is if it is not one.
func (s *Service) fenceErr(err error) error {
	if err == nil || s.seq == "" {
		return err
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "42501", "25006", "42P01", "3F000": // insufficient_privilege, read_only_sql_transaction, undefined_table, invalid_schema_name
		if pgErr.Code == "42P01" || pgErr.Code == "3F000" {
			s.seqReady.Store(false) // dropped since: the next acquire creates it again
		}
		return fmt.Errorf("%w: %w: fences come from sequence %s, made on first use (needs CREATE on the database) and read with nextval (needs USAGE on its schema and on it); "+
			"create it once as an owner and grant USAGE, or turn fencing off with lockcore.NoFencing()", ErrFencing, err, s.seq)
	}
	return err
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
// the connection rather than returning it to the pool. granted says the
// lock is known to have been granted (the statement failed after the grant,
// in nextval): unlocking it is then no phantom.
func (s *Service) cleanupFailed(conn *pgxpool.Conn, key Key, granted bool) {
	defer destroy(conn)
	if conn.Conn().IsClosed() {
		return // the session is gone, and its locks with it
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var was bool
	if err := conn.QueryRow(ctx, s.sql(key).unlock, keyArgs(key)...).Scan(&was); err != nil {
		return // closing the connection ends the session and frees whatever it held
	}
	if was && !granted {
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
