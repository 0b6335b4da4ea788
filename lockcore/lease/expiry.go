package lease

import (
	"context"
	"sync"
	"time"
)

// A Manager keeps two timers, not one per lock or per acquire: arming a
// timer costs a lock cycle more than the rest of the Manager's
// bookkeeping (a new earliest timer wakes the runtime's network poller: a
// futex call, and a thread woken on another core, beside the database's).
//
//   - expiry ends a lock whose lease runs out with no heartbeat renewing
//     it, at its local deadline: its context is cancelled then, not only
//     when Err is next called.
//   - waits ends an Acquire's wait at its deadline (Options.Wait,
//     lockcore.Wait): its context, which the store's requests run under,
//     is cancelled then, as context.WithDeadline's would be.
//
// Each is an alarm: armed no later than the earliest time asked of it, and
// not stopped when what asked no longer needs it. A lock taken after has a
// later deadline (every grant's lease is the Manager's Lease, counted from
// when its request was sent), and so does an acquire with the same wait;
// so a Manager that takes and releases lock after lock arms each timer
// once a Lease or a Wait, when it fires and finds nothing due, not once a
// lock. A renewal only moves a deadline later: the timer then fires early,
// finds the lock renewed, and is armed again for the earliest left.

// alarm runs fire no later than the earliest time it was armed for since
// it last fired.
type alarm struct {
	mu   sync.Mutex
	t    *time.Timer
	at   time.Time // zero: not armed
	fire func()
}

// arm makes the alarm fire no later than at.
func (a *alarm) arm(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.at.IsZero() && !at.Before(a.at) {
		return
	}
	a.at = at
	if a.t == nil {
		a.t = time.AfterFunc(time.Until(at), a.ring)
	} else {
		a.t.Reset(time.Until(at))
	}
}

// ring runs when the timer fires. It disarms the alarm before fire runs:
// a time asked for from then on arms it again, and fire arms it for what
// it found not yet due.
func (a *alarm) ring() {
	a.mu.Lock()
	a.at = time.Time{}
	a.mu.Unlock()
	a.fire()
}

// stop stops the timer; a later arm starts it again.
func (a *alarm) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.t != nil {
		a.t.Stop()
	}
	a.at = time.Time{}
}

// expire runs when the expiry alarm fires: it ends the locks whose
// deadline has passed and arms the alarm for the earliest deadline left.
func (m *Manager) expire() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	locks := make([]*Lock, 0, len(m.locks))
	for _, l := range m.locks {
		locks = append(locks, l)
	}
	m.mu.Unlock()
	var next time.Time
	for _, l := range locks {
		if d := l.expire(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	if !next.IsZero() {
		m.expiry.arm(next)
	}
}

// wait is one Acquire's wait: its deadline, and the cancel of the context
// it runs under.
type wait struct {
	deadline time.Time
	cancel   context.CancelCauseFunc
}

// withWait returns ctx bounded by deadline, as context.WithDeadline does
// (waitCtx), but timed by the Manager's waits alarm; end, once the acquire
// is over, releases the context.
func (m *Manager) withWait(ctx context.Context, deadline time.Time) (_ context.Context, end func()) {
	if !time.Now().Before(deadline) { // already over: ended before anything is sent
		return context.WithDeadline(ctx, deadline)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	w := &wait{deadline: deadline, cancel: cancel}
	m.waitsMu.Lock()
	m.waits[w] = struct{}{}
	m.waitsMu.Unlock()
	m.waitAlarm.arm(deadline)
	return &waitCtx{Context: cctx, deadline: deadline}, func() {
		m.waitsMu.Lock()
		delete(m.waits, w)
		m.waitsMu.Unlock()
		cancel(context.Canceled)
	}
}

// waitCtx is the context of an Acquire's wait, made by withWait. Like
// context.WithDeadline's, it tells its deadline (pgxpool bounds the ping of
// an idle connection by it) and, once its deadline ended it, its Err is
// context.DeadlineExceeded. Its Done and Value are its cancel context's, so
// the standard library and pgx see a cancel context (context.AfterFunc and
// contexts derived from it start no goroutine).
type waitCtx struct {
	context.Context // a context.WithCancelCause of the caller's
	deadline        time.Time
}

func (c *waitCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *waitCtx) Err() error {
	err := c.Context.Err()
	if err == context.Canceled && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// endWaits runs when the waits alarm fires: it ends the waits whose
// deadline has passed (cause context.DeadlineExceeded) and arms the alarm
// for the earliest deadline left.
func (m *Manager) endWaits() {
	now := time.Now()
	var due []*wait
	var next time.Time
	m.waitsMu.Lock()
	for w := range m.waits {
		switch {
		case !now.Before(w.deadline):
			due = append(due, w)
			delete(m.waits, w)
		case next.IsZero() || w.deadline.Before(next):
			next = w.deadline
		}
	}
	m.waitsMu.Unlock()
	for _, w := range due {
		w.cancel(context.DeadlineExceeded)
	}
	if !next.IsZero() {
		m.waitAlarm.arm(next)
	}
}
