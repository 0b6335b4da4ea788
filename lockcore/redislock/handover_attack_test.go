package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// gate is a go-redis hook that holds back a client's extends (the
// take-up's and Extend's script) while it is shut, as a slow Redis or
// network would, and counts the acquire script's answers (the waiter's
// polls).
type gate struct {
	mu    sync.Mutex
	shut  chan struct{} // nil when open
	polls atomic.Int64
}

func (g *gate) close() {
	g.mu.Lock()
	g.shut = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) open() {
	g.mu.Lock()
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
	g.mu.Unlock()
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if len(a) > 1 && fmt.Sprint(a[0]) == "evalsha" && fmt.Sprint(a[1]) == extendScript.Hash() {
			g.mu.Lock()
			shut := g.shut
			g.mu.Unlock()
			if shut != nil {
				select {
				case <-shut:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		err := next(ctx, cmd)
		if len(a) > 1 && fmt.Sprint(a[0]) == "evalsha" && fmt.Sprint(a[1]) == acquireScript.Hash() {
			g.polls.Add(1)
		}
		return err
	}
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// gatedPair is a holder holding "k" (TTL a minute) and a Locker whose
// extends wait behind a shut gate.
func gatedPair(t *testing.T) (holder, waiter *Locker, old *Lock, g *gate) {
	t.Helper()
	ctx := context.Background()
	holder = newLocker(t, Options{Owner: "holder"})
	g = &gate{}
	g.close()
	t.Cleanup(g.open)
	rdb := redis.NewClient(redistest.Client(t).Options())
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(g)
	waiter = lockerOn(t, rdb, Options{Prefix: holder.prefix, Owner: "waiter"})
	// Load the extend script so that the take-up sends EVALSHA.
	if err := extendScript.Load(ctx, holder.rdb).Err(); err != nil {
		t.Fatal(err)
	}
	var err error
	if old, err = holder.Acquire(ctx, "k", lockcore.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	return holder, waiter, old, g
}

// releaseToWaiter releases old once the waiter (queued on "k", listening)
// has just polled, so that the notice finds most of even a short claim
// left and is taken as the grant.
func releaseToWaiter(t *testing.T, holder, waiter *Locker, old *Lock, g *gate) {
	t.Helper()
	ctx := context.Background()
	waitForWaiters(t, holder, "k", 1)
	pgtest.Eventually(t, "the waiter's listener is subscribed", func() bool {
		n, err := holder.rdb.PubSubNumSub(ctx, waiter.channel).Result()
		return err == nil && n[waiter.channel] == 1
	})
	polls := g.polls.Load()
	pgtest.Eventually(t, "the waiter polls", func() bool { return g.polls.Load() > polls })
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// gatedHandOver hands "k" from a holder to a waiter (TTL ttl) whose
// extends wait behind a shut gate, and returns the waiter's Lock, granted
// on the notice, with its take-up held back.
func gatedHandOver(t *testing.T, ttl time.Duration) (holder, waiter *Locker, old, w *Lock, g *gate) {
	t.Helper()
	holder, waiter, old, g = gatedPair(t)
	got := make(chan *Lock, 1)
	go func() {
		w, err := waiter.Acquire(context.Background(), "k", lockcore.Wait(10*time.Second), lockcore.TTL(ttl))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	releaseToWaiter(t, holder, waiter, old, g)
	if w = <-got; w == nil {
		t.FailNow()
	}
	if w.takeup == nil {
		t.Fatal("the waiter was granted by a poll, not by the notice: the case needs a notice-based grant")
	}
	return holder, waiter, old, w, g
}

// Promise (With): a body that returns at once after a notice-based grant
// ends without "lost while held", though its release races the take-up.
func TestWithQuickBodyAfterHandOverNotLost(t *testing.T) {
	ctx := context.Background()
	holder, waiter, old, g := gatedPair(t)
	// The hook acts only on the body's lock, handed to it once the
	// holder's own Release has returned.
	var target atomic.Pointer[Lock]
	t.Cleanup(afterReleaseScript.clear)
	afterReleaseScript.set(func() {
		if k := target.Swap(nil); k != nil {
			g.open()
			<-k.takeup
		}
	})
	released := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- waiter.With(ctx, "k", func(ctx context.Context) error {
			k, _ := lockcore.Held(ctx).Hold.(*Lock)
			if k == nil || k.takeup == nil {
				return errors.New("not granted on the notice: the case needs a notice-based grant")
			}
			<-released
			target.Store(k)
			return nil
		}, lockcore.Wait(10*time.Second))
	}()
	releaseToWaiter(t, holder, waiter, old, g)
	close(released)
	if err := <-done; err != nil {
		t.Fatalf("With: %v", err)
	}
	if ok, err := holder.IsLocked(ctx, "k"); ok || err != nil {
		t.Errorf("after With, IsLocked = %v, %v; want free", ok, err)
	}
}

// Promise: a Release ends the hold as released, never as lost, whatever
// the background take-up is doing. Here the take-up's extend reaches Redis
// after the release's script deleted the key and answers before the
// release marks the lock released (the window afterReleaseScript opens).
func TestReleaseRacingTakeUpIsNotLoss(t *testing.T) {
	ctx := context.Background()
	holder, waiter, _, w, g := gatedHandOver(t, time.Minute)
	w.Context() // watched, as With's body makes it
	t.Cleanup(afterReleaseScript.clear)
	afterReleaseScript.set(func() {
		g.open()
		<-w.takeup // the take-up found the key gone meanwhile
	})
	if err := w.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	afterReleaseScript.clear()
	if got := w.Err(); errors.Is(got, ErrLost) || !errors.Is(got, ErrReleased) {
		t.Errorf("after Release, Err() = %v; want ErrReleased, not lost", got)
	}
	if n := waiter.Stats().Lost; n != 0 {
		t.Errorf("%d holds counted lost, want 0", n)
	}
	if ok, err := holder.IsLocked(ctx, "k"); ok || err != nil {
		t.Errorf("after Release, IsLocked = %v, %v; want free", ok, err)
	}
}

// Promise: Release while the take-up is still on its way leaves the key
// released (a take-up arriving later changes nothing in Redis).
func TestReleaseBeforeTakeUpLeavesKeyFree(t *testing.T) {
	ctx := context.Background()
	holder, _, _, w, g := gatedHandOver(t, time.Minute)
	if err := w.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	g.open()
	within(t, "the take-up ends", w.takeup, 10*time.Second)
	if ok, err := holder.IsLocked(ctx, "k"); ok || err != nil {
		t.Errorf("after Release and the take-up, IsLocked = %v, %v; want free", ok, err)
	}
	if got := w.Err(); !errors.Is(got, ErrReleased) {
		t.Errorf("Err() = %v; want ErrReleased", got)
	}
}

// Promise: an Extend to a shorter TTL right after a notice-based grant
// sticks: the take-up (to the grant's full TTL) does not undo it.
func TestExtendShorterAfterHandOverSticks(t *testing.T) {
	ctx := context.Background()
	holder, _, _, w, g := gatedHandOver(t, time.Minute)
	done := make(chan error, 1)
	go func() { done <- w.Extend(ctx, 200*time.Millisecond) }()
	select {
	case err := <-done:
		t.Fatalf("Extend returned (%v) before the take-up was let through", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pttl, err := holder.rdb.PTTL(ctx, holder.prefix+"k").Result()
	if err != nil || pttl > 200*time.Millisecond {
		t.Fatalf("PTTL %v, %v after Extend(200ms); the take-up undid it", pttl, err)
	}
	w.mu.Lock()
	left := time.Until(w.deadline)
	w.mu.Unlock()
	if left > 200*time.Millisecond {
		t.Errorf("the estimate has %v left after Extend(200ms)", left)
	}
	w.Release(ctx)
}

// Promise: the lease estimate is never late. The take-up is held back
// until after Redis let the claim expire; another token then takes the
// key, and by then the handed-over hold's context must be cancelled.
func TestHandOverEstimateNotLateWhenTakeUpStalls(t *testing.T) {
	ctx := context.Background()
	const ttl = 400 * time.Millisecond // the claim: min(TTL, HandOverTTL)
	holder, _, _, w, _ := gatedHandOver(t, ttl)
	done := w.Done()
	other := newLocker(t, Options{Prefix: holder.prefix, Owner: "other"})
	var k *Lock
	pgtest.Eventually(t, "another token takes the key after the claim", func() bool {
		var err error
		k, err = other.TryAcquire(ctx, "k")
		return err == nil
	})
	select {
	case <-done:
	default:
		t.Fatal("another token holds the key while the handed-over hold's context is not cancelled")
	}
	if !errors.Is(context.Cause(w.Context()), ErrLost) {
		t.Errorf("cause %v, want ErrLost", context.Cause(w.Context()))
	}
	if k.Fence() <= w.Fence() {
		t.Errorf("fence %d after the hand-over's %d", k.Fence(), w.Fence())
	}
	k.Release(ctx)
}

// Promises: exclusion and fences across a chain of notice-based
// hand-overs, while each releasing holder at once tries to take the key
// back: the key is never granted twice, each fence is above the last and
// is the one Redis has.
func TestHandOverChainExclusiveAndFenced(t *testing.T) {
	ctx := context.Background()
	a := newLocker(t, Options{Owner: "a"})
	b := newLocker(t, Options{Prefix: a.prefix, Owner: "b"})
	k, err := a.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	last := k.Fence()
	for i, l := range []*Locker{b, a, b, a} {
		got := make(chan *Lock, 1)
		go func() {
			w, err := l.Acquire(ctx, "k", lockcore.Wait(10*time.Second), lockcore.TTL(time.Minute))
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		waitForWaiters(t, a, "k", 1)
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// The releasing side tries again at once: the key is the waiter's.
		if again, err := a.TryAcquire(ctx, "k"); err == nil {
			t.Fatalf("hand-over %d: a TryAcquire after the release got the key (fence %d)", i, again.Fence())
		}
		if k = <-got; k == nil {
			t.FailNow()
		}
		f, err := a.rdb.HGet(ctx, a.prefix+"k", "f").Int64()
		if err != nil || f != k.Fence() || k.Fence() <= last {
			t.Fatalf("hand-over %d: fence %d (in Redis %d, %v), last %d", i, k.Fence(), f, err, last)
		}
		if tok, _ := a.rdb.HGet(ctx, a.prefix+"k", "t").Result(); tok != k.Token() {
			t.Fatalf("hand-over %d: Redis has another token than the new holder's", i)
		}
		last = k.Fence()
	}
	k.Release(ctx)
}

// Promise: a duplicated hand-over notice (a second "g" for a token that
// already took its grant and released) grants nothing to anyone: the
// waiter it named is gone, and the key stays with whoever holds it.
func TestDuplicatedNoticeGrantsNothing(t *testing.T) {
	ctx := context.Background()
	holder, waiter, _, w, g := gatedHandOver(t, time.Minute)
	g.open()
	within(t, "the take-up ends", w.takeup, 10*time.Second)
	dup := fmt.Sprintf("g %s %d %d", w.Token(), w.Fence(), ms(HandOverTTL))
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A new Acquire on the same Locker waits behind another holder.
	other, err := holder.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	// Long enough to still be waiting when both notices are published
	// (registering and publishing on a loaded box), and so the notices'
	// handling, before the wait ends with nothing.
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	go func() {
		k, _ := waiter.Acquire(wctx, "k", lockcore.Wait(10*time.Second))
		got <- k
	}()
	waitForWaiters(t, holder, "k", 1)
	if err := holder.rdb.Publish(ctx, waiter.channel, dup).Err(); err != nil {
		t.Fatal(err)
	}
	waiter.mu.Lock()
	var tok string
	for tok = range waiter.waiters {
	}
	waiter.mu.Unlock()
	// The same notice re-addressed to the live waiter, with a fence above
	// the holder's: a forged grant is the waiter's to trust, so only a
	// stale fence is tested here.
	stale := fmt.Sprintf("g %s %d %d", tok, w.Fence(), ms(HandOverTTL))
	if err := holder.rdb.Publish(ctx, waiter.channel, stale).Err(); err != nil {
		t.Fatal(err)
	}
	if k := <-got; k != nil {
		t.Fatalf("a waiter got the key (fence %d) while another holds it (fence %d)", k.Fence(), other.Fence())
	}
	other.Release(ctx)
}
