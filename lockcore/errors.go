package lockcore

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrTimeout means the lock, or a connection to take it on, did not come
	// within the timeout.
	ErrTimeout = errors.New("timed out waiting for the lock")
	// ErrReentrant means the key is already held in the caller's context;
	// waiting would deadlock against the caller's own connection.
	ErrReentrant = errors.New("lock already held in this context (reentrant acquire refused)")
	// ErrLost means the lock's session ended while the lock was held (the
	// backend was terminated or the connection broke), so the critical
	// section may not have been exclusive to the end.
	ErrLost = errors.New("lock lost: its database session ended while it was held")
	// ErrReleased is what Lock.Err reports once the lock has been released.
	ErrReleased = errors.New("lock released")
	// ErrLocked means a try found the key held by another session.
	ErrLocked = errors.New("lock held by another session")
)

// AdvisoryLockError is the error of every failed lock operation. Unwrap gives
// ErrTimeout, ErrReentrant, ErrLost, a context error, or the driver's error.
type AdvisoryLockError struct {
	Key    Key
	Op     string        // "acquire", "try" or "release"
	Waited time.Duration // time spent before the failure
	Err    error
}

func (e *AdvisoryLockError) Error() string {
	if e.Waited > 0 {
		return fmt.Sprintf("lockcore: %s %s: %v (after %s)", e.Op, e.Key, e.Err, e.Waited.Round(time.Millisecond))
	}
	return fmt.Sprintf("lockcore: %s %s: %v", e.Op, e.Key, e.Err)
}

func (e *AdvisoryLockError) Unwrap() error { return e.Err }

// IsTimeout reports whether err is or wraps ErrTimeout.
func IsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// IsReentrant reports whether err is or wraps ErrReentrant.
func IsReentrant(err error) bool { return errors.Is(err, ErrReentrant) }
