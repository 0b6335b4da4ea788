package lockcore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// With runs fn while holding key, waiting up to the Service's Wait (or
// the Wait given) for it. fn gets a context that carries the key (for
// reentrancy detection) and its fence (Service.FenceOf), and is cancelled
// when fn returns or, with cause an error wrapping ErrLost, as soon as the
// lock is lost. With returns fn's error, or the acquire's
// *AdvisoryLockError, joined with the release's error if the lock was lost
// (ErrLost). A panic in fn releases the lock and resumes.
func (s *Service) With(ctx context.Context, key Key, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	l, err := s.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	return l.run(ctx, fn)
}

// TryWith runs fn only if key can be taken without waiting for another
// holder, as With does. It reports acquired=false with a nil error when the
// key is held elsewhere or already held in ctx. Waiting for a pooled
// connection still counts against the Service's Wait; running out of it
// is an error.
func (s *Service) TryWith(ctx context.Context, key Key, fn func(ctx context.Context) error) (acquired bool, err error) {
	l, err := s.acquire(ctx, key, s.timeout, true)
	if err != nil {
		if errors.Is(err, ErrLocked) || errors.Is(err, ErrReentrant) {
			return false, nil
		}
		return false, err
	}
	return true, l.run(ctx, fn)
}

// Acquire takes key and returns the held Lock, for holds that span several
// steps, waiting up to the Service's Wait (or the Wait given). The caller
// must call Release.
func (s *Service) Acquire(ctx context.Context, key Key, opts ...AcquireOption) (*Lock, error) {
	return s.acquire(ctx, key, Resolve(opts...).Wait, false)
}

// TryAcquire takes key if no other session holds it. It never returns a nil
// Lock with a nil error: a key held elsewhere is an error wrapping
// ErrLocked, a key already held in ctx one wrapping ErrReentrant.
func (s *Service) TryAcquire(ctx context.Context, key Key) (*Lock, error) {
	return s.acquire(ctx, key, s.timeout, true)
}

// errNoTime says the deadline passed before the lock statement was sent;
// the connection is clean.
var errNoTime = errors.New("no time left for the lock statement")

// acquire takes key: refused at once if ctx holds it already, else from
// the server (grant) or, for a blocking acquire, handed over by a goroutine
// of this Service that holds it. A timeout <= 0 means the Service's timeout.
func (s *Service) acquire(ctx context.Context, key Key, timeout time.Duration, try bool) (*Lock, error) {
	if timeout <= 0 {
		timeout = s.timeout
	}
	a := attempt{s: s, key: key, try: try, start: time.Now()}
	deadline := a.deadline(ctx, timeout)
	attempted := false
	if s.database() == "" {
		// A lock is its key in its database (Entry.Store): the first
		// acquire on s's pool learns which database that is before it
		// checks the held set. It has begun: a failure here is the
		// attempt's.
		s.emit(Event{Kind: EventAttempt, Key: key, Blocking: !try})
		attempted = true
		if err := s.identifyFirst(ctx, deadline); err != nil {
			return nil, a.fail(0, err)
		}
	}
	if s.holds(ctx, key) != nil {
		return nil, a.reentrant()
	}
	e, err := Check(ctx, KindAdvisory, s.database(), key.String(), key.class())
	if err != nil {
		if attempted { // the attempt reported above ends here
			return nil, a.fail(0, err)
		}
		return nil, a.error(err)
	}
	a.entry = e
	if !attempted {
		s.emit(Event{Kind: EventAttempt, Key: key, Blocking: !try})
	}
	if try || s.local == nil || OwnerIn(ctx, s.owner) != s.owner {
		// A task's own lock (WithOwner) waits where a monitor sees it, in
		// its own name: on the server.
		return s.grant(ctx, &a, deadline)
	}
	// A blocking acquire waits behind the Service's own holder of key, if
	// there is one, for the hand-off of its session (handoff.go); only the
	// slot's owner goes to the server.
	l, owner, err := s.local.wait(ctx, &a, key, deadline)
	if !owner {
		return l, err
	}
	l, err = s.grant(ctx, &a, deadline)
	s.local.claimed(key, l)
	return l, err
}

// grant takes a.key on the server: a connection from the pool (the wait
// counts against the deadline), the lock statement on it, and on a grant a
// Lock that watches the connection. A pooled connection whose session had
// already ended (killed while idle) is swapped for a fresh one within the
// same deadline. Every other failure unlocks unconditionally and closes the
// connection.
func (s *Service) grant(ctx context.Context, a *attempt, deadline time.Time) (*Lock, error) {
	key, try := a.key, a.try
	for n := 1; ; n++ {
		conn, err := s.connect(ctx, deadline)
		if err != nil {
			return nil, a.fail(0, err)
		}
		pid := conn.Conn().PgConn().PID()
		fence, granted, err := s.lock(ctx, conn, key, deadline, try)
		switch {
		case err == nil && granted:
			l := s.newLock(ctx, a.entry, conn, key, fence, try)
			s.held.Add(1)
			s.emit(Event{Kind: EventAcquired, Key: key, Blocking: !try, Wait: time.Since(a.start), PID: pid})
			return l, nil
		case err == nil: // a try, and another session holds the key
			conn.Release() // a clean "no": nothing to undo
			s.emit(Event{Kind: EventSkipped, Key: key, Wait: time.Since(a.start), PID: pid})
			return nil, a.error(ErrLocked)
		case errors.Is(err, errNoTime):
			conn.Release() // nothing was sent for the lock: the connection is clean
			return nil, a.fail(pid, ErrTimeout)
		case n < s.maxAttempts && sessionEnded(ctx, conn, err) && time.Now().Before(deadline):
			// The pooled connection's session had ended while it sat idle
			// (a terminated backend, a restart): it held nothing.
			destroy(conn)
			continue
		}
		s.cleanupFailed(conn, key, errors.Is(err, ErrFencing))
		return nil, a.fail(pid, lockErr(ctx, err))
	}
}

// identifyFirst reads the identity of s's database (identify) on a
// connection of its pool, swapping a pooled connection whose session had
// ended for a fresh one as grant does.
func (s *Service) identifyFirst(ctx context.Context, deadline time.Time) error {
	for n := 1; ; n++ {
		conn, err := s.connect(ctx, deadline)
		if err != nil {
			return err
		}
		err = s.identify(ctx, conn, deadline)
		if err == nil {
			conn.Release()
			return nil
		}
		if n < s.maxAttempts && sessionEnded(ctx, conn, err) && time.Now().Before(deadline) {
			destroy(conn)
			continue
		}
		destroy(conn) // a statement may have been cut off mid-way
		return lockErr(ctx, err)
	}
}

// connect takes a connection from the pool by deadline.
func (s *Service) connect(ctx context.Context, deadline time.Time) (*pgxpool.Conn, error) {
	actx, cancel := context.WithDeadline(ctx, deadline)
	s.waiting.Add(1)
	conn, err := s.pool.Acquire(actx)
	s.waiting.Add(-1)
	cancel()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != context.Canceled {
			return nil, fmt.Errorf("%w (waiting for a connection from the lock pool)", ErrTimeout)
		}
		if ctx.Err() == nil { // the pool could not connect: the server is out of reach
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, ctxErr(ctx, err)
	}
	return conn, nil
}

// lock readies conn and sends the lock statement: a try, or a wait that
// the server ends with lock_timeout just before the deadline. It returns
// the fence minted with the grant (0 with fencing off) and, for a try,
// whether the lock was granted.
func (s *Service) lock(ctx context.Context, conn *pgxpool.Conn, key Key, deadline time.Time, try bool) (fence int64, granted bool, err error) {
	if err := s.prepareSession(ctx, conn, deadline); err != nil {
		return 0, false, err
	}
	if err := s.ensureFence(ctx, conn, deadline); err != nil {
		return 0, false, err
	}
	st := s.sql(key)
	if try {
		err = s.query(ctx, conn, deadline, func(qctx context.Context) error {
			if s.seq == "" {
				return conn.QueryRow(qctx, st.try, keyArgs(key)...).Scan(&granted)
			}
			var f pgtype.Int8 // NULL: not granted
			err := conn.QueryRow(qctx, st.try, keyArgs(key)...).Scan(&f)
			fence, granted = f.Int64, f.Valid
			return err
		})
		return fence, granted, s.fenceErr(err)
	}

	remaining := time.Until(deadline).Milliseconds()
	if remaining < 1 {
		return 0, false, errNoTime
	}
	sql, args := st.lock, keyArgs(key)
	if s.sessionTimeout <= 0 || remaining < s.sessionTimeout || remaining-s.sessionTimeout > sessionMargin.Milliseconds() {
		// The session's lock_timeout (set by prepareSession) would not end
		// the wait just before the deadline: this wait, shorter or longer,
		// sets lock_timeout in the statement itself. Otherwise the bare
		// statement does.
		sql, args = st.lockWithin, keyArgs(key, strconv.FormatInt(min(remaining, maxLockTimeout), 10))
	}
	err = s.query(ctx, conn, deadline.Add(backstop), func(qctx context.Context) error {
		if s.seq == "" {
			_, err := conn.Exec(qctx, sql, args...)
			return err
		}
		return conn.QueryRow(qctx, sql, args...).Scan(&fence)
	})
	return fence, err == nil, s.fenceErr(err)
}

// sessionEnded reports whether a failed statement found conn's session
// already over: the connection is closed, not by a deadline of ours, and
// the caller has not given up. Such a session held nothing (its locks ended
// with it), so the acquire may go on with another connection.
func sessionEnded(ctx context.Context, conn *pgxpool.Conn, err error) bool {
	return ctx.Err() == nil && conn.Conn().IsClosed() && !pgconn.Timeout(err) && !errors.Is(err, ErrTimeout)
}

// lockErr explains a failed lock statement: the server's lock_timeout is
// ErrTimeout, and an ended context is the context's error.
func lockErr(ctx context.Context, err error) error {
	var pgErr *pgconn.PgError
	if ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: lock_timeout fired
		return ErrTimeout
	}
	return ctxErr(ctx, err)
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

// attempt is one acquire's bookkeeping: its start, and how its failures are
// reported.
type attempt struct {
	s     *Service
	entry *Entry // the lock's entry in the held set, once granted
	key   Key
	try   bool
	start time.Time
}

func (a *attempt) op() Op {
	if a.try {
		return OpTry
	}
	return OpAcquire
}

// deadline is when the acquire gives up: its timeout, or a little before
// the caller's deadline if that is sooner, so the server's lock_timeout
// fires first and a deadline ends as a clean timeout rather than a cancel
// request.
func (a *attempt) deadline(ctx context.Context, timeout time.Duration) time.Time {
	deadline := a.start.Add(timeout)
	if d, ok := ctx.Deadline(); ok {
		d = d.Add(-min(time.Until(d)/10, ctxMargin))
		if d.Before(deadline) {
			deadline = d
		}
	}
	return deadline
}

// error is the acquire's error for err, with no event (the caller emits).
func (a *attempt) error(err error) error {
	return &AdvisoryLockError{Key: a.key, Op: a.op(), Err: err}
}

// reentrant reports an acquire of a key ctx already holds in the same
// database, and returns its error.
func (a *attempt) reentrant() error {
	a.s.emit(Event{Kind: EventReentrant, Key: a.key, Blocking: !a.try})
	return a.error(ErrReentrant)
}

// fail reports a failed acquire to the observers and returns its error.
func (a *attempt) fail(pid uint32, err error) error {
	w := time.Since(a.start)
	kind := Classify(err)
	if kind != EventTimeout && kind != EventCanceled {
		kind = EventFailed
	}
	a.s.emit(Event{Kind: kind, Key: a.key, Blocking: !a.try, Wait: w, PID: pid, Err: err})
	return &AdvisoryLockError{Key: a.key, Op: a.op(), Waited: w, Err: err}
}
