package redislock

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/lockcore"
)

// The package's errors. Every error it returns wraps at most one of
// ErrNotAcquired, ErrNotHeld and ErrUnavailable, so "held", "gone" and
// "Redis unreachable" are never confused; test with errors.Is.
var (
	// ErrNotAcquired: the key was held by another token for the whole wait
	// (Wait(0): at the single try). When the caller's context ended the wait,
	// the error wraps the context's error too.
	ErrNotAcquired = errors.New("redislock: lock not acquired")
	// ErrNotHeld: the token no longer owns the key (it expired, was
	// force-released, or another holder has it); nothing was changed.
	ErrNotHeld = errors.New("redislock: lock not held")
	// ErrUnavailable: Redis could not be reached (connection refused or
	// lost, pool timeout, no answer within the wait, too many clients).
	// Whether the lock is free or held is unknown. An error reply (OOM,
	// BUSY, READONLY, LOADING, CLUSTERDOWN, ...) is not this: Redis is up
	// and answered, and the error wraps the reply instead.
	ErrUnavailable = errors.New("redislock: redis unavailable")
	// ErrLost is the cause with which a Lock's context is cancelled when the
	// hold is found lost: its TTL ran out without an extension, an extend
	// found the key gone or taken, or it was force-released.
	// It also matches lockcore.ErrLost (errors.Is), the lock family's.
	ErrLost = lockcore.Kin("redislock: lock lost", lockcore.ErrLost)
	// ErrReleased is the cause with which a Lock's context is cancelled by
	// a successful Release.
	// It also matches lockcore.ErrReleased.
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
