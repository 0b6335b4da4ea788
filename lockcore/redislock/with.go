package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// With takes key (waiting up to the Locker's Wait, or lockcore.Wait(d)),
// runs fn while holding it, and releases it when fn returns or panics.
// While fn runs the hold is extended to the full TTL every third of the
// TTL, so fn may outlive the TTL. fn's ctx is a child of ctx that carries
// the held key and is also cancelled, with cause ErrLost, as soon as the
// hold is found lost: an extend found the key gone or taken, a force
// release was announced, or Redis stayed unreachable until the lease ran
// out. fn should stop at once then: another holder may already be running.
//
// The error is fn's, joined with ErrLost if the hold was lost while fn ran
// (also when fn returned nil: its work was not protected to the end), and
// with the release's error if that failed. When the key cannot be taken,
// With returns the Acquire error without running fn; if Redis is
// unreachable and the Locker has FailOpen, it runs fn without the lock
// instead (seed 002's fallback; counted in Stats().FailOpen).
func (l *Locker) With(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...lockcore.AcquireOption) error {
	k, err := l.Acquire(ctx, key, opts...)
	if err != nil {
		return l.openOr(ctx, key, err, fn)
	}
	return k.run(ctx, fn)
}

// TryWith runs fn as With does if key is free now, and reports
// acquired=false with a nil error when another token holds it or ctx holds
// it already. Other failures are errors (FailOpen applies as in With).
func (l *Locker) TryWith(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...lockcore.AcquireOption) (acquired bool, err error) {
	k, err := l.TryAcquire(ctx, key, opts...)
	if errors.Is(err, ErrLocked) || errors.Is(err, ErrReentrant) {
		return false, nil
	}
	if err != nil {
		return false, l.openOr(ctx, key, err, fn)
	}
	return true, k.run(ctx, fn)
}

// openOr returns the acquire's error err, or, with FailOpen and Redis
// unreachable, runs fn unprotected.
func (l *Locker) openOr(ctx context.Context, key string, err error, fn func(ctx context.Context) error) error {
	if l.failOpen && errors.Is(err, ErrUnavailable) {
		l.count.failOpen.Add(1)
		if l.log != nil {
			l.log.Warn("redis unavailable, processing without lock", "key", key, "err", err)
		}
		return fn(ctx)
	}
	return err
}

// run runs fn under the held k, extending it, and releases it.
func (k *Lock) run(ctx context.Context, fn func(ctx context.Context) error) (err error) {
	l, key := k.l, k.key
	// Listen for a force release of this hold (best effort: without the
	// listener it is found at the next extend).
	l.listen()
	defer l.unlisten()

	kctx := k.Context()
	if e := k.entry(); e != nil {
		ctx = lockcore.Carry(ctx, e)
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopCause := context.AfterFunc(kctx, func() { cancel(context.Cause(kctx)) })
	defer stopCause()

	stop, kept := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(kept)
		k.keepAlive(stop, l.ttl)
	}()
	defer func() {
		close(stop)
		<-kept
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		rerr := k.Release(rctx)
		rcancel()
		if errors.Is(k.ended(), ErrLost) {
			err = errors.Join(err, fmt.Errorf("redislock: %s: lost while held: %w", key, ErrLost))
			return
		}
		if rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(fctx)
}

// keepAlive extends the hold to ttl every third of ttl until stop closes or
// the hold ends. While Redis is unreachable it retries more often; if Redis
// stays away the lease timer declares the hold lost.
func (k *Lock) keepAlive(stop <-chan struct{}, ttl time.Duration) {
	every := ttl / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-k.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(k.Context(), max(every, 100*time.Millisecond))
		err := k.Extend(ctx, ttl)
		cancel()
		switch {
		case err == nil:
			t.Reset(ttl / 3)
		case errors.Is(err, ErrNotHeld):
			return // Extend has marked the hold lost
		default:
			t.Reset(max(ttl/30, 10*time.Millisecond))
		}
	}
}
