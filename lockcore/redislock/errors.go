package redislock

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/lockcore"
)

// The package's errors. Each matches the lock family's sentinel of the
// same name in lockcore (errors.Is(err, lockcore.ErrLocked) holds for a
// Redis try that found the key taken, as for an advisory one), and every
// error the package returns wraps at most one of ErrLocked, ErrTimeout,
// ErrNotHeld and ErrUnavailable, so "held", "gone" and "Redis unreachable"
// are never confused.
var (
	// ErrLocked: a try (TryAcquire, TryWith) found the key held by another
	// token.
	ErrLocked = lockcore.Kin("redislock: lock held by another token", lockcore.ErrLocked)
	// ErrTimeout: the key was held by another token for the whole wait, or
	// the caller's deadline ended the wait (the error then wraps
	// context.DeadlineExceeded too).
	ErrTimeout = lockcore.Kin("redislock: lock not acquired within the wait", lockcore.ErrTimeout)
	// ErrNotHeld: the token no longer owns the key (it expired, was
	// force-released, or another holder has it); nothing was changed.
	ErrNotHeld = lockcore.Kin("redislock: lock not held", lockcore.ErrNotHeld)
	// ErrUnavailable: Redis could not be reached (connection refused or
	// lost, pool timeout, no answer within the wait, too many clients).
	// Whether the lock is free or held is unknown. An error reply (OOM,
	// BUSY, READONLY, LOADING, CLUSTERDOWN, ...) is not this: Redis is up
	// and answered, and the error wraps the reply instead.
	ErrUnavailable = lockcore.Kin("redislock: redis unavailable", lockcore.ErrUnavailable)
	// ErrReentrant: the caller's context holds the key already (waiting
	// would be for itself), or, with a strict lockcore.Order, holds a lock
	// that must come after this one.
	ErrReentrant = lockcore.Kin("redislock: lock already held in this context", lockcore.ErrReentrant)
	// ErrLost is the cause with which a Lock's context is cancelled when the
	// hold is found lost: its TTL ran out without an extension, an extend
	// found the key gone or taken, or it was force-released.
	ErrLost = lockcore.Kin("redislock: lock lost", lockcore.ErrLost)
	// ErrReleased is the cause with which a Lock's context is cancelled by
	// a successful Release.
	ErrReleased = lockcore.Kin("redislock: lock released", lockcore.ErrReleased)
)

// unavailable reports whether err (not a context error) means Redis could
// not be reached: a network or pool error, or no answer in time. An error
// reply is an answer from a Redis that is up, whatever it says (OOM, BUSY,
// READONLY, LOADING, CLUSTERDOWN, WRONGTYPE, ...): it is returned as is,
// and With fails closed on it even with FailOpen, since another holder may
// hold the key. The one exception is "max number of clients reached",
// with which Redis refuses a new connection: Redis cannot be reached.
func unavailable(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		return strings.HasPrefix(strings.TrimPrefix(re.Error(), "ERR "), "max number of clients")
	}
	return true
}
