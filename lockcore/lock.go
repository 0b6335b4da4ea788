package lockcore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Lock is a held session lock. Release it exactly once; further calls
// return what the first returned.
//
// From a millisecond into the hold, a goroutine watches its connection,
// which is idle (the body works on other connections): when the server ends
// the session (a terminated backend, a restart or crash) or the connection
// breaks, the lock is lost at once: its Context is cancelled with an error
// wrapping ErrLost as the cause, Done is closed, Err reports the loss, and
// observers get EventLost, all before any Release.
type Lock struct {
	s        *Service
	key      Key
	owner    string // the Service's, or the task's (WithOwner)
	db       string // the database's identity (database.go)
	entry    *Entry // its place in the family's held set
	conn     *pgxpool.Conn
	nc       net.Conn // the connection's socket: Release stops the watch with a read deadline on it
	pid      uint32
	fence    int64
	ctx      context.Context
	cancel   context.CancelCauseFunc
	at       time.Time
	blocking bool

	watch    atomic.Int32   // watchPending, watchStarted or watchCanceled
	watching sync.WaitGroup // the watch, once it has started
	stopping atomic.Bool    // Release has begun: a read deadline ends the watch cleanly

	mu       sync.Mutex
	state    lockState
	lost     *AdvisoryLockError // the loss (Op OpHold), once lost
	done     chan struct{}      // made on the first call of Done
	signaled bool               // the context is cancelled: Done may be closed

	once sync.Once
	rerr error
}

type lockState uint8

const (
	stateHeld lockState = iota
	stateLost
	stateReleased
)

// watchDelay is how far into a hold the watch of its connection starts.
// A hold that ends sooner never starts one, which keeps a short critical
// section (most of them) at two round trips, no goroutine and no timer of
// its own; a loss in the first moment of a longer hold is seen as soon as
// the watch starts, since the server's farewell waits on the socket.
const watchDelay = time.Millisecond

// The states of a Lock's watch. Release and the Service's starter race to
// move it from watchPending with a compare-and-swap; exactly one wins.
const (
	watchPending  int32 = iota // not started yet
	watchStarted               // the starter started it: Release must stop it
	watchCanceled              // Release came first: it never starts
)

// starter starts the watches of a Service's locks once they have been
// held for watchDelay. One timer per Service, armed only while a lock
// waits for its watch, serves every lock: a timer per lock would make the
// runtime wake its network poller at every grant, which costs a short
// critical section more than the whole watch.
type starter struct {
	mu      sync.Mutex
	pending []*Lock // in grant order; released ones are dropped as found
	armed   bool
	timer   *time.Timer
}

func newStarter() *starter {
	st := &starter{}
	st.timer = time.AfterFunc(time.Hour, st.run)
	st.timer.Stop()
	return st
}

// add queues l's watch to start at l.at + watchDelay.
func (st *starter) add(l *Lock) {
	st.mu.Lock()
	st.pending = append(st.pending, l)
	if !st.armed {
		st.armed = true
		st.timer.Reset(watchDelay)
	}
	st.mu.Unlock()
}

// run starts the watches that are due, forgets the locks released
// meanwhile, and re-arms for the next one.
func (st *starter) run() {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	i := 0
	for ; i < len(st.pending); i++ {
		l := st.pending[i]
		if l.watch.Load() != watchPending {
			continue // released before its watch was due
		}
		if due := l.at.Add(watchDelay); due.After(now) {
			st.timer.Reset(due.Sub(now))
			break
		}
		if l.watch.CompareAndSwap(watchPending, watchStarted) {
			go l.watchConn()
		}
	}
	clear(st.pending[:i]) // no references to released locks
	st.pending = st.pending[i:]
	if len(st.pending) == 0 {
		st.pending = st.pending[:0:0]
		st.armed = false
	}
}

// closed is a closed channel, the Done of a lock that ended before anyone
// asked for it.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// newLock makes the Lock of a grant and arranges the watch of its
// connection.
func (s *Service) newLock(ctx context.Context, e *Entry, conn *pgxpool.Conn, key Key, fence int64, try bool) *Lock {
	pc := conn.Conn().PgConn()
	l := &Lock{s: s, key: key, owner: OwnerIn(ctx, s.owner), db: s.database(), conn: conn, nc: pc.Conn(), pid: pc.PID(), fence: fence, at: time.Now(), blocking: !try}
	ne := *e // a hand-off's waiter may have no entry of its own left over; every grant gets one
	ne.Hold = l
	l.entry = &ne
	l.ctx, l.cancel = context.WithCancelCause(Push(ctx, l.entry))
	l.watching.Add(1)
	s.starter.add(l)
	return l
}

// Key returns the key held.
func (l *Lock) Key() Key { return l.key }

// Owner returns the owner id the lock was taken in the name of (the
// Service's, or the task's: WithOwner), which its connection's
// application_name carries.
func (l *Lock) Owner() string { return l.owner }

// PID returns the process id of the backend whose session holds the lock.
func (l *Lock) PID() uint32 { return l.pid }

// Fence returns the lock's fencing token: strictly greater than the fence
// of every earlier grant of the same key in the same database by a Service
// drawing from the same sequence, or 0 when fencing is off. Storage that
// accepts a write only with a fence at least as high as the last one it
// saw refuses a holder that lost its lock to a later grant.
func (l *Lock) Fence() int64 { return l.fence }

// Context returns a context that carries the held key (so that a nested
// acquire of the same key fails with ErrReentrant) and its fence
// (Service.FenceOf).
// It is derived from the acquire's context, and is cancelled when the lock
// is released (cause ErrReleased) or lost (cause an error wrapping ErrLost:
// errors.Is(context.Cause(ctx), ErrLost)).
func (l *Lock) Context() context.Context { return l.ctx }

// Done is closed once the lock is released or lost; the acquire's context
// ending does not close it.
func (l *Lock) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		// signaled, not the state: a lock that has recorded its end but
		// not yet cancelled its context (a loss's observers run in between)
		// must not look done, or its Done's reader finds no cause.
		if l.signaled {
			return closed
		}
		l.done = make(chan struct{})
	}
	return l.done
}

// Err is nil while the lock is held, an error wrapping ErrLost once it is
// lost (also after a later Release), and ErrReleased after Release.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case stateLost:
		return l.lost
	case stateReleased:
		return ErrReleased
	}
	return nil
}

// Release unlocks and returns the connection to the pool. It runs on a
// fresh short context built from ctx's values only, so a cancelled ctx still
// releases. If the unlock fails the connection is closed, which frees the
// lock on the server. A lock lost before or during Release makes it return
// an error wrapping ErrLost; after a loss it sends nothing.
func (l *Lock) Release(ctx context.Context) error {
	l.once.Do(func() { l.rerr = l.release(ctx) })
	return l.rerr
}

func (l *Lock) release(ctx context.Context) error {
	// Stop the watch, or keep it from starting: a read deadline in the
	// past wakes its read at once. pgproto3 keeps a message cut short by
	// the deadline, so nothing the server sent is lost to the unlock's read.
	l.stopping.Store(true)
	if l.watch.CompareAndSwap(watchPending, watchCanceled) {
		l.watching.Done() // it never started
	} else {
		_ = l.nc.SetReadDeadline(time.Unix(1, 0))
	}
	l.watching.Wait()
	if lost := l.lostErr(); lost != nil {
		l.s.local.left(l) // in case the loss came before the hand-off knew of l
		return &AdvisoryLockError{Key: l.key, Op: OpRelease, Err: lost.Err}
	}
	if handed, err := l.s.local.handOff(ctx, l); handed {
		return nil
	} else if err != nil {
		return &AdvisoryLockError{Key: l.key, Op: OpRelease, Err: l.lose(err).Err}
	}

	rctx, clear := bounded(ctx, l.conn, time.Now().Add(cleanupTimeout))
	var was bool
	err := l.conn.QueryRow(rctx, l.s.sql(l.key).unlock, keyArgs(l.key)...).Scan(&was)
	clear()
	if err == nil && was {
		held := time.Since(l.at)
		l.conn.Release()
		l.s.held.Add(-1)
		l.end(stateReleased, nil)
		l.s.local.left(l)
		l.s.emit(Event{Kind: EventReleased, Key: l.key, Blocking: l.blocking, Held: held, PID: l.pid})
		return nil
	}
	// The session ended after the watch stopped, or the unlock found the
	// lock gone (a session that is not ours: a pooler in transaction mode).
	if err == nil {
		err = errors.New("pg_advisory_unlock found it not held")
	}
	lost := l.lose(err)
	return &AdvisoryLockError{Key: l.key, Op: OpRelease, Err: lost.Err}
}

func (l *Lock) lostErr() *AdvisoryLockError {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// end records the lock's last state, then tells Done and its context (so
// whoever sees either finds Err already set).
func (l *Lock) end(st lockState, lost *AdvisoryLockError) {
	l.record(st, lost)
	l.signal(lost)
}

// record sets the lock's final state: Err says so from here on.
func (l *Lock) record(st lockState, lost *AdvisoryLockError) {
	l.mu.Lock()
	l.state, l.lost = st, lost
	l.mu.Unlock()
}

// signal cancels the lock's context, with cause lost, or ErrReleased when
// lost is nil, and closes Done.
func (l *Lock) signal(lost *AdvisoryLockError) {
	// The context first: whoever sees Done closed finds its cause set.
	if lost != nil {
		l.cancel(lost)
	} else {
		l.cancel(ErrReleased)
	}
	l.mu.Lock()
	l.signaled = true
	if l.done != nil {
		close(l.done)
	}
	l.mu.Unlock()
}

// watchConn waits on the idle lock connection for what only a session's end
// sends: a FATAL error (57P01 terminated, a shutdown, a crash) or the
// connection closing. It blocks in pgconn's ReceiveMessage with
// context.Background, so pgx runs no context watcher; Release ends it with a
// read deadline. Asynchronous messages of a live session (ParameterStatus,
// notices, notifications) are handled by pgconn as usual and ignored here.
func (l *Lock) watchConn() {
	defer l.watching.Done()
	pc := l.conn.Conn().PgConn()
	for {
		msg, err := pc.ReceiveMessage(context.Background())
		if err == nil {
			e, ok := msg.(*pgproto3.ErrorResponse)
			if !ok {
				continue // the session lives
			}
			err = pgconn.ErrorResponseToPgError(e)
		} else if l.stopping.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			return // Release stopped the watch
		}
		l.lose(err)
		return
	}
}

// lose records that the lock was lost because of cause, cancels its
// context, closes Done, frees its connection's place in the pool, and
// reports the loss to observers and the log. It runs once, from the watch
// or from Release, never both (Release waits for the watch to end).
func (l *Lock) lose(cause error) *AdvisoryLockError {
	held := time.Since(l.at)
	lost := &AdvisoryLockError{Key: l.key, Op: OpHold, Err: fmt.Errorf("%w: %w", ErrLost, cause)}
	l.record(stateLost, lost)
	_ = l.nc.Close() // the session is over for us: make sure of it, so the server frees the lock too
	destroy(l.conn)
	l.s.held.Add(-1)
	l.s.local.left(l) // the next waiter takes the key on the server, as it would have had it waited there
	// Observers hear of the loss before the holder's context says so, so
	// that a holder counting losses sees its own.
	l.s.emit(Event{Kind: EventLost, Key: l.key, Blocking: l.blocking, Held: held, PID: l.pid, Err: lost})
	l.signal(lost)
	l.s.log.Warn("advisory lock lost while held", "key", l.key.String(), "pid", l.pid, "fence", l.fence, "err", cause)
	return lost
}

// run calls fn under the lock and releases it afterwards, also when fn
// panics (the panic then carries on up the stack).
func (l *Lock) run(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if rerr := l.Release(ctx); rerr != nil {
			if err == nil {
				err = rerr
			} else {
				err = errors.Join(err, rerr)
			}
		}
	}()
	return fn(l.ctx)
}
