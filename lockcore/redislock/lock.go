package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// Lock is one grant of a key to a token. Its methods are safe for
// concurrent use. The token is a capability: whoever has it can resume,
// extend and release the hold.
type Lock struct {
	l     *Locker
	key   string
	ks    keyset
	token string
	fence int64
	owner string
	epoch uint64 // the Locker's subscription (0: none) when the grant's request was sent
	// held is the lock's place in the held set (nil: resumed, not acquired
	// here), pushed on the acquire's ctx (parent) when the lock's context
	// is first asked for (pushed): a lock whose context is never asked for
	// makes none.
	held   *lockcore.Entry
	parent context.Context
	// takeup, when not nil, is closed once a hand-over's claim has been
	// taken up to the grant's TTL (or found gone, or run out): Extend
	// waits for it, so that a shorter TTL it sets is not undone.
	takeup chan struct{}

	mu       sync.Mutex
	deadline time.Time       // estimated end of the lease, by this client's clock
	cause    error           // nil while held here; ErrReleased or ErrLost once ended
	release  bool            // a Release is under way: it finds out itself whether the key was still held
	base     context.Context // what the lock's context derives from: the acquire's values, with the held set (pushed)
	ctx      context.Context
	cancel   context.CancelCauseFunc
	timer    *time.Timer // while the context is watched: fires at deadline
}

// start records a grant whose lease ends no earlier than base+ttl by
// Redis's clock, estimated here less drift (lockcore.LocalDeadline).
func (k *Lock) start(base time.Time, ttl time.Duration) {
	k.deadline = lockcore.LocalDeadline(base, ttl)
}

// takeUp extends a hand-over's claim to ttl, as the waiter's poll would
// have: once answered, the lease is counted from this request. A key found
// gone or taken is lost; while Redis does not answer it retries until the
// claim runs out by the estimate, and the lease timer then declares it lost.
func (k *Lock) takeUp(ttl time.Duration) {
	defer close(k.takeup)
	if f := beforeTakeUp.get(); f != nil {
		f()
	}
	for {
		k.mu.Lock()
		deadline, ended := k.deadline, k.cause != nil
		k.mu.Unlock()
		if ended || !time.Now().Before(deadline) {
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		sent := time.Now()
		n, err := extendScript.Run(ctx, k.l.rdb, []string{k.ks.hold}, k.token, ms(ttl)).Int()
		cancel()
		switch {
		case err == nil && n == 0:
			k.gone("its hand-over was gone before it was taken up")
			return
		case err == nil:
			k.mu.Lock()
			if k.cause == nil {
				k.deadline = lockcore.LocalDeadline(sent, ttl)
				if k.timer != nil {
					k.timer.Reset(time.Until(k.deadline))
				}
			}
			k.mu.Unlock()
			return
		}
		time.Sleep(10 * time.Millisecond) // Redis is away: try again
	}
}

// takenUp waits until a hand-over's claim is taken up, or ctx ends.
func (k *Lock) takenUp(ctx context.Context) error {
	if k.takeup == nil {
		return nil
	}
	select {
	case <-k.takeup:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watch returns the lock's context, making it on first use: only a watched
// lock gets a lease timer and revocation notices, so a hold that step 1 of a
// workflow hands on by its token is not reported lost here when its TTL
// passes elsewhere.
func (k *Lock) watch() context.Context {
	k.mu.Lock()
	if k.ctx != nil {
		defer k.mu.Unlock()
		return k.ctx
	}
	base := k.pushed()
	if base == nil {
		base = context.Background()
	}
	k.ctx, k.cancel = context.WithCancelCause(base)
	ctx := k.ctx
	if k.cause != nil {
		k.cancel(k.cause)
		k.mu.Unlock()
		return ctx
	}
	k.timer = time.AfterFunc(time.Until(k.deadline), func() { k.lose("its TTL passed") })
	l := k.l
	l.mu.Lock()
	// A force release announced before the watch began (between the grant
	// and With's run, say) found no hold to end: it ends this one now.
	revoked := l.revoked.take(k.token, k.fence)
	var lis *listener
	if !revoked {
		l.holds[k.token] = append(l.holds[k.token], k)
		// A notice published since the grant while no subscription was up
		// reached nobody. Once watched, the hold is checked at the next
		// subscription; if one is up now that was not at the grant, its
		// check may have run already: check this hold now.
		if l.epoch != 0 && l.epoch != k.epoch {
			lis = l.lis
			lis.check.Add(1) // before the unlock: a stop waits for it
		}
	}
	l.mu.Unlock()
	k.mu.Unlock()
	if revoked {
		k.lose("it was force-released before it was watched")
	}
	if lis != nil {
		go func() {
			defer lis.check.Done()
			l.checkHolds(lis.quit, []*Lock{k})
		}()
	}
	return ctx
}

// end marks the lock ended with cause; it reports false if it already was.
// announce, if not nil, runs once the cause is set and before the context
// is cancelled, so that whoever sees Done closed finds the end counted.
func (k *Lock) end(cause error, announce func()) bool {
	k.mu.Lock()
	if k.cause != nil {
		k.mu.Unlock()
		return false
	}
	k.cause = cause
	watched := k.ctx != nil
	if watched {
		k.timer.Stop()
	}
	k.mu.Unlock()
	if announce != nil {
		announce()
	}
	if watched {
		k.cancel(cause)
		k.l.mu.Lock()
		if ks := slices.DeleteFunc(k.l.holds[k.token], func(h *Lock) bool { return h == k }); len(ks) > 0 {
			k.l.holds[k.token] = ks
		} else {
			delete(k.l.holds, k.token)
		}
		k.l.mu.Unlock()
	}
	return true
}

// ended returns the cause the lock ended with, or nil.
func (k *Lock) ended() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cause
}

// gone ends the lock as lost (why) when a check (a take-up, a hold check
// after a resubscription) found the key gone or taken, unless a Release is
// under way: the check may be seeing that release's own delete, and the
// release ends the lock itself.
func (k *Lock) gone(why string) {
	k.mu.Lock()
	releasing := k.release
	k.mu.Unlock()
	if !releasing {
		k.lose(why)
	}
}

// lose ends the lock as lost: its context is cancelled with cause ErrLost.
func (k *Lock) lose(why string) {
	k.end(ErrLost, func() {
		k.l.observeFailure(ReasonLost)
		if k.l.log != nil {
			k.l.log.Warn("session lock lost", "key", k.key, "fence", k.fence, "why", why)
		}
	})
}

// Key returns the lock's key, without the prefix.
func (k *Lock) Key() string { return k.key }

// pushed returns what the lock's context derives from, pushing the lock
// on the acquire's held set the first time; nil for a resumed lock. k.mu
// is held.
func (k *Lock) pushed() context.Context {
	if k.base == nil && k.held != nil {
		k.base = lockcore.Push(context.WithoutCancel(k.parent), k.held)
		k.parent = nil
	}
	return k.base
}

// entry returns the lock's place in the held set of its acquire's context,
// pushed on what that context held; nil for a resumed lock.
func (k *Lock) entry() *lockcore.Entry {
	if k.held == nil {
		return nil // resumed: not acquired in this process
	}
	k.mu.Lock()
	k.pushed()
	k.mu.Unlock()
	return k.held
}

// Owner returns the owner id it is held in the name of: the Locker's
// (Options.Owner), or the task's (lockcore.WithOwner); for a resumed lock,
// the hold's, as Redis keeps it (the step that took it, not the Locker that
// resumed it).
func (k *Lock) Owner() string { return k.owner }

// Token returns the hold's token: store it in workflow state to Resume,
// extend or release the hold from a later step or another process.
func (k *Lock) Token() string { return k.token }

// Fence returns the grant's fencing token: strictly greater than the fence
// of every earlier grant of this key (across expiry, release and force
// release), so storage can refuse a stale holder's write by comparing it.
func (k *Lock) Fence() int64 { return k.fence }

// Context returns a context that carries the acquire's values and the held
// key (for reentrancy and the order check), and is cancelled when the hold ends: with
// cause ErrLost when it is found lost (its TTL passed without an extension,
// by this client's estimate; an extend, TTL or release found the key gone or
// taken; a force release was announced to this Locker), with cause
// ErrReleased by Release. Use context.Cause to tell them apart. The lease
// timer and the revocation notices start with the first call of Context
// or Done.
func (k *Lock) Context() context.Context { return k.watch() }

// Done is closed when the hold ends; see Context.
func (k *Lock) Done() <-chan struct{} { return k.watch().Done() }

// Err is nil while the hold is not known to have ended, an error wrapping
// ErrLost once it is found lost (also after a later Release), and one
// wrapping ErrReleased after Release. A lease that has run out by this
// client's estimate is lost at the first call, not at the lease timer's
// tick. Like Context and Done, the first call starts the lease timer and
// the revocation notices.
func (k *Lock) Err() error {
	k.watch()
	k.mu.Lock()
	expired := k.cause == nil && !time.Now().Before(k.deadline)
	k.mu.Unlock()
	if expired {
		k.lose("its TTL passed")
	}
	if cause := k.ended(); cause != nil {
		return fmt.Errorf("redislock: %s: %w", k.key, cause)
	}
	return nil
}

// TTL returns the time left before Redis releases the hold by itself, or
// ErrNotHeld (and the lock is marked lost) if the token no longer holds it.
func (k *Lock) TTL(ctx context.Context) (time.Duration, error) {
	_, left, _, err := check(ctx, k.l.rdb, k.ks, k.token)
	if errors.Is(err, ErrNotHeld) {
		k.lose("TTL found it gone")
		return 0, fmt.Errorf("redislock: %s: %w", k.key, ErrNotHeld)
	}
	if err != nil {
		k.l.observeFailure(ReasonRedisError)
		return 0, k.l.redisError(k.key, err)
	}
	return left, nil
}

// Extend sets the time left to ttl (it may shorten it), if the token still
// holds the key. ErrNotHeld if it expired or was taken; the lock is then
// lost, and its context cancelled. A lock already ended (released, or seen
// lost) is not extended.
func (k *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("redislock: extending %s: ttl %v is not positive", k.key, ttl)
	}
	if err := k.takenUp(ctx); err != nil {
		k.l.observeFailure(ReasonRedisError)
		return k.l.redisError(k.key, err)
	}
	if err := k.endedErr(); err != nil {
		k.l.observeFailure(ReasonNotHeld)
		return err
	}
	sent := time.Now()
	n, err := extendScript.Run(ctx, k.l.rdb, []string{k.ks.hold}, k.token, ms(ttl)).Int()
	if err != nil {
		k.l.observeFailure(ReasonRedisError)
		return k.l.redisError(k.key, err)
	}
	if n == 0 {
		k.l.observeFailure(ReasonNotHeld)
		k.lose("an extend found it gone or taken")
		return fmt.Errorf("redislock: extending %s: %w", k.key, ErrNotHeld)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cause != nil {
		// The lease timer fired while the extend was on its way: the hold
		// was already given up for lost here, and stays so.
		return fmt.Errorf("redislock: extending %s: %w", k.key, errors.Join(ErrNotHeld, ErrLost))
	}
	k.deadline = lockcore.LocalDeadline(sent, ttl)
	if k.timer != nil {
		k.timer.Reset(time.Until(k.deadline))
	}
	return nil
}

// endedErr is the error of an operation on an ended lock.
func (k *Lock) endedErr() error {
	cause := k.ended()
	if cause == nil {
		return nil
	}
	if errors.Is(cause, ErrReleased) {
		return fmt.Errorf("redislock: %s: already released: %w", k.key, ErrNotHeld)
	}
	return fmt.Errorf("redislock: %s: %w", k.key, errors.Join(ErrNotHeld, ErrLost))
}

// Release deletes the hold if the token still holds the key, and hands the
// key to the longest waiter in the same step. ErrNotHeld if the token no
// longer holds it (it expired, or was force-released or taken): nothing is
// deleted then. A lock seen lost here is still released if Redis says the
// token holds it (the lease estimate errs early).
func (k *Lock) Release(ctx context.Context) error {
	if errors.Is(k.ended(), ErrReleased) {
		k.l.observeFailure(ReasonNotHeld)
		return fmt.Errorf("redislock: releasing %s: already released: %w", k.key, ErrNotHeld)
	}
	// No wait for a take-up under way: whichever reaches Redis first, the
	// key ends released (a take-up after the release finds the token gone
	// and changes nothing).
	k.mu.Lock()
	k.release = true
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.release = false
		k.mu.Unlock()
	}()
	n, err := releaseScript.Run(ctx, k.l.rdb, k.ks.all(), k.token).Int()
	if f := afterReleaseScript.get(); f != nil {
		f()
	}
	if err != nil {
		k.l.observeFailure(ReasonRedisError)
		return k.l.redisError(k.key, err)
	}
	if n < 0 {
		// Gone or taken: the hold was lost, whether or not it was seen.
		k.l.observeFailure(ReasonNotHeld)
		k.lose("the release found it gone or taken")
		return fmt.Errorf("redislock: releasing %s: %w", k.key, errors.Join(ErrNotHeld, ErrLost))
	}
	if n == 1 {
		k.l.count.handOvers.Add(1)
	}
	k.end(ErrReleased, nil)
	return nil
}
