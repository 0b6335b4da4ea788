package lockcore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The lock family's sentinels: every kind (advisory locks here, Redis
// session locks in lockcore/redislock, lease locks in lockcore/lease)
// returns errors that match these with errors.Is, whatever its own
// sentinels are called, so code above the locks needs one table of
// outcomes.
var (
	// ErrLocked means a try found the lock held by another holder.
	ErrLocked = errors.New("lock held by another session")
	// ErrTimeout means the lock, or a connection to take it on, did not come
	// within the wait (or before the context's deadline).
	ErrTimeout = errors.New("timed out waiting for the lock")
	// ErrUnavailable means the lock's store (the database, Redis) could not
	// be reached, so whether the lock is free is unknown.
	ErrUnavailable = errors.New("lock store unavailable")
	// ErrLost means the lock ended while it was held (for an advisory lock:
	// its session ended: the backend was terminated, the server restarted or
	// crashed, or the connection broke), so the critical section may not
	// have been exclusive to the end.
	ErrLost = errors.New("lock lost: its database session ended while it was held")
	// ErrReleased is what Lock.Err reports, and the cause of Lock.Context,
	// once the lock has been released.
	ErrReleased = errors.New("lock released")
	// ErrNotHeld means an operation on a held lock (release, extend) found
	// it no longer held by its holder.
	ErrNotHeld = errors.New("lock not held")
	// ErrReentrant means the acquire was refused because of what the
	// caller's context holds already: the same key (waiting would deadlock
	// against the caller's own hold), or a lock that must come after it in a
	// declared order.
	ErrReentrant = errors.New("lock already held in this context (reentrant acquire refused)")
	// ErrFencing means the fencing sequence could not be created or used
	// (missing privileges, a read-only connection). The error says how to
	// fix it, or to turn fencing off with NoFencing.
	ErrFencing = errors.New("fencing token unavailable")
)

// Op names the operation an AdvisoryLockError comes from.
type Op string

// The operations. A Lock's loss while it is held is OpHold; the error of a
// Release after that loss is OpRelease.
const (
	OpAcquire Op = "acquire"  // With, Acquire
	OpTry     Op = "try"      // TryWith, TryAcquire
	OpHold    Op = "hold"     // the lock was lost while held (Lock.Err, the cause of Lock.Context)
	OpRelease Op = "release"  // Lock.Release, and the release at the end of With
	OpXact    Op = "xact"     // XactLock
	OpTryXact Op = "try xact" // TryXactLock
)

// AdvisoryLockError is the error of every failed lock operation. Unwrap
// gives ErrTimeout, ErrReentrant, ErrLocked, an error wrapping ErrLost or
// ErrFencing, a context error, or the driver's error.
type AdvisoryLockError struct {
	Key    Key
	Op     Op
	Waited time.Duration // time spent before the failure (acquire side)
	Err    error
}

func (e *AdvisoryLockError) Error() string {
	if e.Waited > 0 {
		return fmt.Sprintf("lockcore: %s %s: %v (after %s)", e.Op, e.Key, e.Err, e.Waited.Round(time.Millisecond))
	}
	return fmt.Sprintf("lockcore: %s %s: %v", e.Op, e.Key, e.Err)
}

func (e *AdvisoryLockError) Unwrap() error { return e.Err }

// Classify returns the event kind that reports err, an error from a lock
// call of this package (or nil): EventAcquired for nil, EventTimeout,
// EventReentrant, EventSkipped (ErrLocked), EventLost, EventCanceled (the
// caller's context was cancelled), and EventFailed for anything else. It is
// the one mapping from errors to outcomes; the events a Service emits use
// it too.
func Classify(err error) EventKind {
	switch {
	case err == nil:
		return EventAcquired
	case errors.Is(err, ErrTimeout): // before the context errors: a deadline is a timeout
		return EventTimeout
	case errors.Is(err, ErrReentrant):
		return EventReentrant
	case errors.Is(err, ErrLocked):
		return EventSkipped
	case errors.Is(err, ErrLost):
		return EventLost
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return EventCanceled
	}
	return EventFailed
}

// Kin returns a new sentinel error with message msg that errors.Is also
// matches with kin, one of this package's sentinels. The lock family's other
// packages (lockcore/lease, lockcore/redislock) declare their ErrLost and
// friends with it, so code that sorts outcomes by lockcore's sentinels
// needs no table per lock kind, while each package's sentinels stay
// distinct from each other.
func Kin(msg string, kin error) error { return &kinError{msg, kin} }

type kinError struct {
	msg string
	kin error
}

func (e *kinError) Error() string { return e.msg }

// Is reports whether target is e's kin in lockcore.
func (e *kinError) Is(target error) bool { return target == e.kin }
