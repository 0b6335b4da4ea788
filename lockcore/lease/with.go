package lease

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// With takes r in mode as Acquire does, runs fn with the lock's context
// (cancelled, cause an error wrapping ErrLost, if the lock is lost), and
// releases it when fn returns or panics. It returns fn's error joined with
// the release's, and with an error wrapping ErrLost if the lock was lost
// while fn ran (taken over, or its lease ran out).
// LockOf(ctx, r) gives fn the lock.
func (m *Manager) With(ctx context.Context, r Resource, mode Mode, fn func(ctx context.Context) error, opts ...lockcore.AcquireOption) error {
	l, err := m.Acquire(ctx, r, mode, opts...)
	if err != nil {
		return err
	}
	return run(ctx, []*Lock{l}, fn)
}

// TryWith runs fn as With does if r can be taken in mode at once, and
// reports acquired=false with a nil error when it is held in a conflicting
// mode (ErrLocked) or ctx holds it already or out of order (ErrLockOrder).
func (m *Manager) TryWith(ctx context.Context, r Resource, mode Mode, fn func(ctx context.Context) error) (acquired bool, err error) {
	l, err := m.TryAcquire(ctx, r, mode)
	if errors.Is(err, ErrLocked) || errors.Is(err, ErrLockOrder) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, run(ctx, []*Lock{l}, fn)
}

// WithAll takes every request as AcquireAll does (all or none, in the
// global order; the wait, Options.Wait or lockcore.Wait(d), bounds the
// whole), runs fn with a context that carries them all and is cancelled
// when any of them is lost, and releases them, newest first, when fn
// returns or panics. The error is fn's joined with the releases' and with
// ErrLost for a lock lost while fn ran, as With's.
func (m *Manager) WithAll(ctx context.Context, reqs []Request, fn func(ctx context.Context) error, opts ...lockcore.AcquireOption) error {
	wait := cmp.Or(lockcore.Resolve(opts...).Wait, m.opts.Wait)
	locks, err := m.acquireAll(ctx, time.Now().Add(wait), reqs)
	if err != nil {
		return err
	}
	return run(ctx, locks, fn)
}

// run calls fn under locks (in acquire order) and releases them afterwards,
// newest first, also when fn panics. fn's context is the newest lock's
// (which carries them all), also cancelled when an older one is lost.
func run(ctx context.Context, locks []*Lock, fn func(context.Context) error) (err error) {
	defer func() {
		rctx := context.WithoutCancel(ctx)
		for _, l := range slices.Backward(locks) {
			rerr := l.Release(rctx)
			if lerr := l.Err(); rerr == nil && errors.Is(lerr, ErrLost) {
				rerr = lerr // lost while fn ran, though nobody took it over
			}
			err = errors.Join(err, rerr)
		}
	}()
	fctx := locks[len(locks)-1].ctx
	if len(locks) > 1 {
		var cancel context.CancelCauseFunc
		fctx, cancel = context.WithCancelCause(fctx)
		defer cancel(nil)
		for _, l := range locks[:len(locks)-1] {
			stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
			defer stop()
		}
	}
	return fn(fctx)
}
