// Package alarm times the lock family's deadlines with one timer per kind
// of deadline rather than one per lock or per acquire. Arming a timer
// costs a lock cycle more than the rest of a lock's bookkeeping: a new
// earliest timer wakes the runtime's network poller (a futex call, and a
// thread woken on another core, beside the database's).
//
// An Alarm is armed no later than the earliest time asked of it, and not
// stopped when what asked no longer needs it. A lock taken after another
// has a later deadline when both have the same lease, and so does an
// acquire with the same wait; so a client that takes and releases lock
// after lock arms the timer once a lease or a wait, when it fires and
// finds nothing due, not once a lock. A deadline that moves later (a
// renewal) makes the timer fire early: whatever it fires finds the lock
// renewed and arms the alarm again for the earliest deadline left.
package alarm

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Alarm runs Fire no later than the earliest time it was armed for since
// it last fired. Set Fire before the first Arm.
type Alarm struct {
	Fire func()

	mu sync.Mutex
	t  *time.Timer
	at time.Time // zero: not armed
}

// Arm makes the alarm fire no later than at.
func (a *Alarm) Arm(at time.Time) {
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

// ring runs when the timer fires. It disarms the alarm before Fire runs:
// a time asked for from then on arms it again, and Fire arms it for what
// it found not yet due.
func (a *Alarm) ring() {
	a.mu.Lock()
	a.at = time.Time{}
	a.mu.Unlock()
	a.Fire()
}

// Stop stops the timer; a later Arm starts it again.
func (a *Alarm) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.t != nil {
		a.t.Stop()
	}
	a.at = time.Time{}
}

// Waits bounds contexts by deadlines, as context.WithDeadline does, timed
// by one Alarm. The zero value is ready to use.
type Waits struct {
	alarm Alarm
	mu    sync.Mutex
	m     map[*Context]struct{}
}

// With returns ctx bounded by deadline (see Context); end releases it once
// the work under it is over.
func (ws *Waits) With(ctx context.Context, deadline time.Time) (_ context.Context, end func()) {
	if !time.Now().Before(deadline) { // already over: ended before anything is sent
		return context.WithDeadline(ctx, deadline)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	c := &Context{Context: cctx, deadline: deadline, cancel: cancel}
	ws.mu.Lock()
	if ws.m == nil { // under mu: Len may read m meanwhile
		ws.m = map[*Context]struct{}{}
		ws.alarm.Fire = ws.end
	}
	ws.m[c] = struct{}{}
	ws.mu.Unlock()
	ws.alarm.Arm(deadline)
	return c, func() {
		ws.mu.Lock()
		delete(ws.m, c)
		ws.mu.Unlock()
		if c.ended.CompareAndSwap(open, byCaller) {
			cancel(context.Canceled)
		} else {
			cancel(context.DeadlineExceeded) // the alarm decided first: its cause, whichever cancel runs first
		}
	}
}

// Len returns the contexts under way (for tests).
func (ws *Waits) Len() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.m)
}

// end runs when the alarm fires: it ends the contexts whose deadline has
// passed (cause context.DeadlineExceeded) and arms the alarm for the
// earliest deadline left.
func (ws *Waits) end() {
	now := time.Now()
	var due []*Context
	var next time.Time
	ws.mu.Lock()
	for c := range ws.m {
		switch {
		case !now.Before(c.deadline):
			due = append(due, c)
			delete(ws.m, c)
		case next.IsZero() || c.deadline.Before(next):
			next = c.deadline
		}
	}
	ws.mu.Unlock()
	for _, c := range due {
		// A context the caller's ended first keeps its Err (Canceled,
		// whatever the cause), as context.WithDeadline's does.
		if c.Context.Err() == nil && c.ended.CompareAndSwap(open, byDeadline) {
			c.cancel(context.DeadlineExceeded)
		}
	}
	if !next.IsZero() {
		ws.alarm.Arm(next)
	}
}

// Context is a context of Waits.With. Like context.WithDeadline's, it
// tells its deadline (pgxpool bounds the ping of an idle connection by it,
// go-redis with ContextTimeoutEnabled a command's socket deadlines) and,
// once its deadline ended it, its Err is context.DeadlineExceeded (and
// Canceled when the caller's context ended it, whatever the cause). Its
// Done and Value are its cancel context's, so the standard library and pgx
// see a cancel context (context.AfterFunc and contexts derived from it
// start no goroutine). Unlike context.WithDeadline's, a context derived
// from it reports Err Canceled when the deadline ends it (its Cause is
// DeadlineExceeded): the runtime gives a derived context its cancel
// context's err, which only the context package's own timer makes
// DeadlineExceeded. Tell a timeout by this context's Err, or a Cause.
type Context struct {
	context.Context // a context.WithCancelCause of the caller's
	deadline        time.Time
	cancel          context.CancelCauseFunc
	// ended is who ended it first of the alarm and end (open until one
	// did): Err says DeadlineExceeded only when the alarm did. A caller's
	// cancel landing between the alarm's check and its cancel leaves Err
	// DeadlineExceeded with the caller's cause: both came as the deadline
	// passed.
	ended atomic.Int32
}

// Who ended a Context (Context.ended).
const (
	open int32 = iota
	byDeadline
	byCaller
)

// Deadline is the earlier of the caller's deadline and the wait's.
func (c *Context) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Err is context.DeadlineExceeded once the wait's deadline ended it.
func (c *Context) Err() error {
	err := c.Context.Err()
	if err == context.Canceled && c.ended.Load() == byDeadline {
		return context.DeadlineExceeded
	}
	return err
}
