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
	// ErrUnavailable: Redis could not be reached or cannot serve (connection
	// refused or lost, pool timeout, LOADING, CLUSTERDOWN, READONLY, ...).
	// Whether the lock is free or held is unknown.
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

// notServing lists the error replies with which a reachable Redis says it
// cannot serve now; they count as unavailable, not as a bug.
var notServing = []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "TRYAGAIN", "BUSY",
	"NOREPLICAS", "UNBLOCKED", "OOM", "max number of clients"}

// unavailable reports whether err (not a context error) means Redis could
// not answer: a network or pool error, or a reply saying it cannot serve.
// Any other error reply (WRONGTYPE: the key holds something that is not
// this package's lock) is the caller's problem and is returned as is.
func unavailable(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		msg := strings.TrimPrefix(re.Error(), "ERR ")
		for _, p := range notServing {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	return true
}
