package redislock

import (
	"context"
	"sync/atomic"
)

// Points on the lock's path where tests (and benchmarks) run code of
// their own. Each is read atomically: a goroutine an earlier test left
// running (a take-up, a listener) may read one while the next test sets
// it, and a plain variable made that a data race.
var (
	// beforeNotice runs before the listener delivers a notice: a delay
	// injected there is a slow pub/sub delivery.
	beforeNotice hook[func()]
	// afterReleaseScript runs between a release's script and the lock
	// being marked released.
	afterReleaseScript hook[func()]
	// beforeTakeUp runs before a hand-over's take-up sends anything.
	beforeTakeUp hook[func()]
	// afterRegister runs with the caller's ctx once a waiting Acquire's
	// first try found the key held: it is queued in Redis.
	afterRegister hook[func(ctx context.Context)]
	// awaiting runs each time a waiting Acquire whose subscription is
	// confirmed (and polled after) is about to wait for a notice or its
	// next poll: a release from then on is seen as a notice.
	awaiting hook[func()]
	// holdsChecked runs once the check of the watched holds that a
	// confirmed subscription starts has ended.
	holdsChecked hook[func()]
)

// hook holds a function of type F, or none.
type hook[F any] struct{ p atomic.Pointer[F] }

// set makes f the hook's function.
func (h *hook[F]) set(f F) { h.p.Store(&f) }

// clear removes the hook's function.
func (h *hook[F]) clear() { h.p.Store(nil) }

// get returns the hook's function, or F's zero value (nil) if none is set.
func (h *hook[F]) get() F {
	if p := h.p.Load(); p != nil {
		return *p
	}
	var zero F
	return zero
}
