package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// The sentinels are distinct from each other. ErrLocked, ErrTimeout, ErrLost
// and ErrReleased also match lockcore's sentinels of the same name, ErrLockOrder
// lockcore.ErrReentrant and ErrBusy lockcore.ErrUnavailable
// (errors.Is(err, lockcore.ErrLost) holds for a lost lease), so code that
// sorts the lock family's outcomes by lockcore's sentinels (workers, the
// simulator) needs no second table for lease locks.
var (
	// ErrLocked means a try found the resource held in a conflicting mode (or
	// a writer waiting ahead of a reader).
	ErrLocked error = lockcore.Kin("resource held in a conflicting mode", lockcore.ErrLocked)
	// ErrTimeout means the lock, the upgrade or all of AcquireAll's locks did
	// not come within Options.Wait.
	ErrTimeout error = lockcore.Kin("timed out waiting for the lock", lockcore.ErrTimeout)
	// ErrLost means the lock is no longer held: its row was taken over or
	// removed, or its lease ran out with no heartbeat renewing it. The work
	// done under it may not have been exclusive to the end.
	ErrLost error = lockcore.Kin("lease lost", lockcore.ErrLost)
	// ErrLockOrder means the acquire would break the global lock order of
	// seed 004 §8.1: the context already holds a resource that sorts at or
	// after the one asked for. It is refused instead of risking a deadlock.
	// It matches lockcore.ErrReentrant, the family's "refused because of
	// what the context holds".
	ErrLockOrder = lockcore.Kin("out of the global lock order (projects, maps, sketches; by id within a level)", lockcore.ErrReentrant)
	// ErrNotUpgradeable means Upgrade was called on a lock not held in
	// Upgradeable mode.
	ErrNotUpgradeable = errors.New("lock not held in upgradeable mode")
	// ErrReleased is what Lock.Err reports after Release, and the cause of
	// the lock's context then.
	ErrReleased error = lockcore.Kin("lock released", lockcore.ErrReleased)
	// ErrClosed means the Manager was closed.
	ErrClosed = errors.New("lease manager closed")
	// ErrNotWriteLocked means WriteAtomic was called on a lock not held in
	// Write mode.
	ErrNotWriteLocked = errors.New("lock not held in write mode")
	// ErrCrossDevice means the temporary and final directories of an atomic
	// write are on different filesystems, so the rename would not be atomic.
	ErrCrossDevice = errors.New("temporary and final directories are on different devices")
	// ErrBusy means the SQLite file stayed locked by a writer in another
	// process for longer than the busy timeout (10s), so the operation
	// could not even look at the lock table. Acquire keeps trying until
	// its Wait passes (then ErrTimeout); TryAcquire and the other
	// operations return it.
	// It matches lockcore.ErrUnavailable: the store could not be used.
	ErrBusy = lockcore.Kin("the database file is busy: another process kept it locked past the busy timeout", lockcore.ErrUnavailable)
	// ErrJobExists means StartJob was given the ID of a job that is queued or
	// running and alive.
	ErrJobExists = errors.New("a job with this id is queued or running")
)

// Error is the error of every failed lock operation. Unwrap gives one of the
// sentinels above, a context error, or the database driver's error.
type Error struct {
	Op       string // "acquire", "try", "upgrade", "release", ...
	Resource Resource
	Mode     Mode
	Waited   time.Duration // time spent before the failure, when it waited
	Err      error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("lease: %s %s", e.Op, e.Resource)
	if e.Mode != 0 {
		s += " (" + e.Mode.String() + ")"
	}
	s += ": " + e.Err.Error()
	if e.Waited > 0 {
		s += fmt.Sprintf(" (after %s)", e.Waited.Round(time.Millisecond))
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }
