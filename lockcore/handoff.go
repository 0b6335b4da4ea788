package lockcore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultHandOffs is how many times in a row a released lock may pass
	// to a goroutine of the same Service, on the session that holds it,
	// before it is released on the server so other sessions get their turn.
	DefaultHandOffs = 32
	// DefaultHandOffHold is how long a session may keep a lock across local
	// hand-offs before it is released on the server: with the server's own
	// queue, it bounds how long a waiter of another session waits for a key
	// this Service keeps passing around (plus the critical section then
	// running, and that session's own turn in the server's queue).
	DefaultHandOffHold = 10 * time.Millisecond
)

// HandOff turns the in-process hand-off on: when a lock is released and
// another goroutine of this Service waits for the same key, that goroutine
// gets the session still holding the lock, with a new fence, instead of an
// unlock and a lock on the server. A lock passes so at most n times in a
// row (n <= 0: DefaultHandOffs), and for at most hold (<= 0:
// DefaultHandOffHold) since its session was granted it by the server,
// before it is released on the server so other sessions get their turn.
//
// It is off by default because the goroutines that wait for a hand-off wait
// in the Service, not in the server's queue: pg_locks (and so a monitor)
// shows the holder's session but not them (HandOffWaiting counts them).
func HandOff(n int, hold time.Duration) Option {
	return option(func(c *config) {
		c.handOffs, c.handOffHold = n, hold
		if n <= 0 {
			c.handOffs = DefaultHandOffs
		}
		if hold <= 0 {
			c.handOffHold = DefaultHandOffHold
		}
	})
}

// NoHandOff turns the in-process hand-off off (the default): every
// blocking acquire waits in the server's queue on a connection of its own,
// and every release unlocks on the server.
func NoHandOff() Option { return option(func(c *config) { c.handOffs = 0 }) }

// HandOffs returns how many grants this Service has made by passing a
// released lock's session to a goroutine waiting for the same key,
// cumulative.
func (s *Service) HandOffs() int64 {
	if s.local == nil {
		return 0
	}
	return s.local.count.Load()
}

// maxDraw bounds how many fences one round trip draws ahead.
const maxDraw = 64

// locals is the in-process hand-off of one Service. For every key a
// blocking acquire of this Service holds or is taking on the server, a slot
// queues the Service's other goroutines that want it. Only the slot's
// owner goes to the server; the others wait here, without a connection, and
// get the owner's session, still holding the lock, when it is released:
// no unlock, no lock and no wake-up of another backend. The grant still
// carries a new fence from the sequence (see fence), and the new Lock
// watches the session as any other, so loss detection and reentrancy are
// those of a server grant. After max hand-offs, or hold after the server's
// grant, the owner releases on the server, so that a waiter of another
// session, which the server queued ahead of ours, gets the key.
type locals struct {
	max   int
	hold  time.Duration
	count atomic.Int64

	mu   sync.Mutex
	keys map[Key]*slot
}

// slot is one key's owner and queue. It exists while a goroutine of the
// Service holds the key, is taking it on the server, or is being handed it.
type slot struct {
	holder   *Lock     // the lock now held; nil while the owner is on the server or a hand-off is under way
	since    time.Time // when the server granted the lock to the session now holding it
	handOffs int       // local hand-offs since then
	fences   []int64   // fences drawn ahead on that session, ascending
	queue    []*waiter // FIFO
}

// waiter is a goroutine queued for a key. It gets exactly one grant.
type waiter struct {
	ctx   context.Context // the acquire's: the handed Lock's context derives from it
	entry *Entry          // the acquire's place in the held set, to fill in
	ch    chan *Lock      // buffered: a handed lock, or nil for "you own the slot: go to the server"
}

func newLocals(n int, hold time.Duration) *locals {
	if n <= 0 {
		return nil
	}
	return &locals{max: n, hold: hold, keys: make(map[Key]*slot)}
}

// wait takes a place for key: the slot's ownership if no goroutine of the
// Service has the key (owner true: take it on the server, then call
// claimed), or a place in its queue until the holder hands the lock over
// (a Lock), makes this goroutine the owner, or the deadline or ctx ends the
// wait (an error).
func (lc *locals) wait(ctx context.Context, a *attempt, key Key, deadline time.Time) (l *Lock, owner bool, err error) {
	lc.mu.Lock()
	sl := lc.keys[key]
	if sl == nil {
		lc.keys[key] = &slot{}
		lc.mu.Unlock()
		return nil, true, nil
	}
	w := &waiter{ctx: ctx, entry: a.entry, ch: make(chan *Lock, 1)}
	sl.queue = append(sl.queue, w)
	lc.mu.Unlock()

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	var cause error
	select {
	case l := <-w.ch:
		if ctx.Err() == nil {
			return lc.granted(a, l)
		}
		// Both were ready: an ended context wins, as it does on the server.
		if l != nil {
			l.giveBack()
		} else {
			lc.abandon(key)
		}
		return nil, false, a.fail(0, ctxErr(ctx, ctx.Err()))
	case <-timer.C:
		cause = ErrTimeout
	case <-ctx.Done():
		cause = ctxErr(ctx, ctx.Err())
	}
	lc.mu.Lock()
	queued := false
	if sl := lc.keys[key]; sl != nil {
		if i := slices.Index(sl.queue, w); i >= 0 {
			sl.queue, queued = slices.Delete(sl.queue, i, i+1), true
		}
	}
	lc.mu.Unlock()
	if !queued { // a grant was already on its way: take it, then give it up
		if l := <-w.ch; l != nil {
			l.giveBack()
		} else {
			lc.abandon(key)
		}
	}
	return nil, false, a.fail(0, cause)
}

// granted finishes a waiter's wait on what it was given.
func (lc *locals) granted(a *attempt, l *Lock) (*Lock, bool, error) {
	if l == nil {
		return nil, true, nil
	}
	a.s.emit(Event{Kind: EventAcquired, Key: a.key, Blocking: true, Wait: time.Since(a.start), PID: l.pid})
	return l, false, nil
}

// claimed ends the owner's acquire on the server: l holds the key from
// now on, or (l nil) the acquire failed and the next waiter, if any, owns
// the slot.
func (lc *locals) claimed(key Key, l *Lock) {
	if l == nil {
		lc.abandon(key)
		return
	}
	lc.mu.Lock()
	sl := lc.keys[key]
	sl.holder, sl.since, sl.handOffs, sl.fences = l, l.at, 0, nil
	lc.mu.Unlock()
	if l.lostErr() != nil { // lost before it was recorded here: its loss found no slot to pass on
		lc.left(l)
	}
}

// abandon gives up the slot's ownership: to the first waiter, who goes to
// the server next, or, with none, by removing the slot.
func (lc *locals) abandon(key Key) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	sl := lc.keys[key]
	if len(sl.queue) == 0 {
		delete(lc.keys, key)
		return
	}
	w := sl.queue[0]
	sl.queue = slices.Delete(sl.queue, 0, 1)
	sl.holder = nil
	w.ch <- nil
}

// left says l no longer holds its key (unlocked on the server, or lost):
// its slot passes to the next waiter, who takes the key on the server.
func (lc *locals) left(l *Lock) {
	if lc == nil {
		return
	}
	lc.mu.Lock()
	sl := lc.keys[l.key]
	mine := sl != nil && sl.holder == l
	if mine {
		sl.holder = nil
	}
	lc.mu.Unlock()
	if mine {
		lc.abandon(l.key)
	}
}

// handOff passes l's session, still holding the key, to the first waiter,
// with a new fence, if there is one and the run is within its bounds. It
// reports whether it did (l is then released); if not, the caller unlocks
// on the server and calls left. err is a loss found while drawing fences:
// l is lost, and the caller reports it.
func (lc *locals) handOff(ctx context.Context, l *Lock) (handed bool, err error) {
	if lc == nil {
		return false, nil
	}
	lc.mu.Lock()
	sl := lc.keys[l.key]
	if sl == nil || sl.holder != l || len(sl.queue) == 0 || sl.handOffs >= lc.max || time.Since(sl.since) >= lc.hold {
		lc.mu.Unlock()
		return false, nil
	}
	w := sl.queue[0]
	sl.queue = slices.Delete(sl.queue, 0, 1)
	sl.holder = nil // under way: arrivals queue, and nobody else touches sl's run
	sl.handOffs++
	fences, left := sl.fences, min(lc.max-sl.handOffs+1, maxDraw)
	lc.mu.Unlock()

	fence, fences, err := l.s.nextFence(ctx, l, fences, left)
	if err != nil {
		// The session did not answer: the lock is lost. The waiter goes back
		// to the head of the queue, and the loss passes the slot to it.
		lc.mu.Lock()
		sl.queue = slices.Insert(sl.queue, 0, w)
		sl.holder = l
		lc.mu.Unlock()
		return false, err
	}
	_ = l.nc.SetReadDeadline(time.Time{})                            // lift the deadline that stopped l's watch
	next := l.s.newLock(w.ctx, w.entry, l.conn, l.key, fence, false) // held stays as it is: one lock for another
	held := time.Since(l.at)
	l.end(stateReleased, nil)
	l.s.emit(Event{Kind: EventReleased, Key: l.key, Blocking: true, Held: held, PID: l.pid})

	lc.mu.Lock()
	sl.holder, sl.fences = next, fences
	lc.mu.Unlock()
	lc.count.Add(1)
	w.ch <- next
	return true, nil
}

// nextFence returns the fence of a hand-off on l's session, and the fences
// left for later hand-offs. Fences are drawn from the sequence on the
// session that holds the lock, up to n at once (one round trip for the
// run's remaining hand-offs, at most maxDraw), and used in order. That keeps the fencing
// promise: every number was drawn while this session held the key (the
// draw itself proves the session alive), so each is above the fence of
// every earlier grant of the key, every grant elsewhere comes after this
// session lets go and draws a higher one, and the hand-offs use them
// ascending. With fencing off there is nothing to draw: the hand-off sends
// nothing at all.
func (s *Service) nextFence(ctx context.Context, l *Lock, fences []int64, n int) (int64, []int64, error) {
	if s.seq == "" {
		return 0, nil, nil
	}
	if len(fences) == 0 {
		var err error
		if fences, err = s.drawFences(ctx, l, n); err != nil {
			return 0, nil, err
		}
	}
	return fences[0], fences[1:], nil
}

// drawSQL draws fences ahead. Its implicit transaction commits with
// synchronous_commit on (set for itself, whatever the session says), so
// the fences it hands out are durable before any is used: a crash must not
// hand the same numbers out again (the lock statements do the same).
const drawSQL = "SELECT nextval($1::regclass) FROM generate_series(1, $2::int4) WHERE set_config('synchronous_commit', 'on', true) IS NOT NULL"

// drawFences draws n fences in one statement on l's connection.
func (s *Service) drawFences(ctx context.Context, l *Lock, n int) ([]int64, error) {
	qctx, clear := bounded(ctx, l.conn, time.Now().Add(cleanupTimeout))
	defer clear()
	rows, err := l.conn.Query(qctx, drawSQL, s.seq, max(n, 1))
	if err != nil {
		return nil, s.fenceErr(err)
	}
	var fences []int64
	for rows.Next() {
		var f int64
		if err := rows.Scan(&f); err != nil {
			rows.Close()
			return nil, err
		}
		fences = append(fences, f)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fenceErr(err)
	}
	if len(fences) == 0 {
		return nil, errors.New("the fencing sequence returned no value")
	}
	slices.Sort(fences)
	return fences, nil
}

// giveBack releases a lock handed to a waiter that had given up meanwhile:
// on to the next waiter, or on the server.
func (l *Lock) giveBack() {
	if err := l.Release(context.Background()); err != nil {
		l.s.log.Warn("lockcore: releasing a lock handed to a waiter that had given up", "key", l.key.String(), "err", fmt.Sprint(err))
	}
}

// HandOffWaiting returns how many goroutines of this Service wait for a key
// another of its goroutines holds or is taking. They wait in the Service,
// not in the server's queue, so pg_locks shows only the holder's session.
func (s *Service) HandOffWaiting() int {
	if s.local == nil {
		return 0
	}
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	n := 0
	for _, sl := range s.local.keys {
		n += len(sl.queue)
	}
	return n
}
