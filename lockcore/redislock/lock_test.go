package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// Seed 002's own test: concurrent requests on one session are serialised,
// never interleaved. Eight workers instead of the seed's two.
func TestConcurrentRequestsSerialised(t *testing.T) {
	l := newLocker(t, Options{Wait: 30 * time.Second})
	ctx := context.Background()
	var (
		mu      sync.Mutex
		results []string
		inside  atomic.Int32
		wg      sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 5 {
				err := l.With(ctx, "test:session", func(ctx context.Context) error {
					if n := inside.Add(1); n != 1 {
						t.Errorf("%d holders at once", n)
					}
					mu.Lock()
					results = append(results, fmt.Sprintf("start:%d.%d", w, i))
					mu.Unlock()
					time.Sleep(time.Millisecond) // widen the window an overlap would show in
					mu.Lock()
					results = append(results, fmt.Sprintf("end:%d.%d", w, i))
					mu.Unlock()
					inside.Add(-1)
					return nil
				})
				if err != nil {
					t.Errorf("With: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if len(results) != 80 {
		t.Fatalf("%d results, want 80", len(results))
	}
	for i := 0; i < len(results); i += 2 {
		s, e := strings.TrimPrefix(results[i], "start:"), strings.TrimPrefix(results[i+1], "end:")
		if s != e || !strings.HasPrefix(results[i], "start:") {
			t.Fatalf("interleaved at %d: %v", i, results[i:i+2])
		}
	}
	if st := l.Stats(); st.Acquired != 40 || st.Waited == 0 || st.HandOvers == 0 {
		t.Errorf("stats %+v: want 40 acquired, some waits and hand-overs", st)
	}
}

// Seed 002's own test: a lock that is never released frees itself after
// its TTL, and the holder's context says it was lost.
func TestAutoReleaseAfterTTL(t *testing.T) {
	l := newLocker(t, Options{})
	other := newLocker(t, Options{Prefix: l.prefix})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "test:timeout", lockcore.TTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// No release: the TTL frees it, and the waiter gets it.
	k2, err := other.Acquire(ctx, "test:timeout", lockcore.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("acquire after the TTL: %v", err)
	}
	defer k2.Release(ctx)
	within(t, "the expired lock's Done closes", k.Done(), 5*time.Second)
	if c := context.Cause(k.Context()); !errors.Is(c, ErrLost) {
		t.Errorf("expired lock's cause = %v, want ErrLost", c)
	}
	if k2.Fence() <= k.Fence() {
		t.Errorf("fence after expiry %d, not above %d", k2.Fence(), k.Fence())
	}
}

// A plain Acquire never extends by itself: its TTL runs out.
func TestAcquireDoesNotExtend(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k", lockcore.TTL(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "the key expires", func() bool {
		held, err := l.IsLocked(ctx, "k")
		return err == nil && !held
	})
	// Nobody watched it (a workflow's step 1 hands the hold on by token):
	// no loss is reported until someone looks.
	if st := l.Stats(); st.Lost != 0 {
		t.Errorf("an unwatched expired lock counted lost: %+v", st)
	}
	within(t, "Done of the expired lock closes", k.Done(), 5*time.Second)
	if st := l.Stats(); st.Lost != 1 || !errors.Is(context.Cause(k.Context()), ErrLost) {
		t.Errorf("watched after expiry: stats %+v, cause %v", st, context.Cause(k.Context()))
	}
	if err := k.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("release after expiry: %v, want ErrNotHeld", err)
	}
}

// Release after expiry reports ErrNotHeld and deletes nothing: the seed's
// bare DELETE removed the next holder's lock here.
func TestReleaseAfterExpiryDeletesNothing(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k1, err := l.Acquire(ctx, "k", lockcore.TTL(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := l.Acquire(ctx, "k", lockcore.Wait(10*time.Second), lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := k1.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale release: %v, want ErrNotHeld", err)
	}
	if err := k1.Extend(ctx, time.Hour); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale extend: %v, want ErrNotHeld", err)
	}
	left, err := k2.TTL(ctx)
	if err != nil || left > time.Minute {
		t.Fatalf("the new holder after a stale release and extend: TTL %v, %v", left, err)
	}
	if err := k2.Release(ctx); err != nil {
		t.Fatalf("the new holder's release: %v", err)
	}
	if st := l.Stats(); st.NotHeld != 2 {
		t.Errorf("NotHeld = %d, want 2", st.NotHeld)
	}
}

// A token that does not hold the key can neither release nor extend it.
func TestWrongTokenCannotReleaseOrExtend(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Resume(ctx, "k", "not-the-token"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Resume with a wrong token: %v, want ErrNotHeld", err)
	}
	forged := &Lock{l: l, key: "k", ks: keysFor(l.prefix, "k"), token: "not-the-token"}
	forged.start(time.Now(), time.Minute)
	if err := forged.Extend(ctx, time.Hour); !errors.Is(err, ErrNotHeld) {
		t.Errorf("extend with a wrong token: %v, want ErrNotHeld", err)
	}
	forged2 := &Lock{l: l, key: "k", ks: keysFor(l.prefix, "k"), token: "not-the-token-either"}
	forged2.start(time.Now(), time.Minute)
	if err := forged2.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("release with a wrong token: %v, want ErrNotHeld", err)
	}
	left, err := k.TTL(ctx)
	if err != nil || left > time.Minute {
		t.Fatalf("holder after wrong-token calls: TTL %v, %v; want held, not extended", left, err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A hold taken in one workflow step is resumed by its token in another
// "pod" (another Locker, another client), keeps its fence and its owner,
// and is released there.
func TestResumeInAnotherLocker(t *testing.T) {
	podA := newLocker(t, Options{Owner: "pod-a"})
	podB := lockerOn(t, redistest.Client(t), Options{Prefix: podA.prefix, Owner: "pod-b"})
	ctx := context.Background()
	key := SessionKey("t1", "a1", "c1", "web")
	k, err := podA.Acquire(ctx, key, lockcore.TTL(300*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	token := k.Token() // what step 1 stores in the workflow state

	r, err := podB.Resume(ctx, key, token)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if r.Fence() != k.Fence() || r.Token() != token || r.Key() != key {
		t.Errorf("resumed lock %q fence %d, want %q fence %d", r.Key(), r.Fence(), key, k.Fence())
	}
	// The hold is pod A's, whoever resumes it: Owner says what Redis and
	// the monitor say (the owner it was taken in the name of).
	if r.Owner() != "pod-a" {
		t.Errorf("resumed lock's Owner() = %q, want the hold's, %q", r.Owner(), "pod-a")
	}
	if left, err := r.TTL(ctx); err != nil || left <= 290*time.Second {
		t.Errorf("resumed TTL %v, %v", left, err)
	}
	if err := r.Extend(ctx, 300*time.Second); err != nil {
		t.Errorf("Extend from the resumed lock: %v", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatalf("Release from pod B: %v", err)
	}
	if held, err := podA.IsLocked(ctx, key); err != nil || held {
		t.Errorf("IsLocked after release = %v, %v", held, err)
	}
	if err := k.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("pod A's release after pod B released: %v, want ErrNotHeld", err)
	}
	if _, err := podB.Resume(ctx, key, token); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Resume after release: %v, want ErrNotHeld", err)
	}
}

// Fences only grow, across release, expiry, force release, hand-over, and
// even the loss of the fence counter (a flush, or a failover that lost it).
func TestFenceStrictlyIncreasing(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	var last int64
	next := func(how string, k *Lock) {
		t.Helper()
		if k.Fence() <= last {
			t.Fatalf("fence %d after %s, not above %d", k.Fence(), how, last)
		}
		last = k.Fence()
	}
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	next("the first grant", k)
	k.Release(ctx)

	k, _ = l.Acquire(ctx, "k", lockcore.TTL(50*time.Millisecond))
	next("a release", k)
	k, err = l.Acquire(ctx, "k", lockcore.Wait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	next("an expiry", k)

	if ok, err := l.ForceRelease(ctx, "k", "test"); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	k, _ = l.Acquire(ctx, "k")
	next("a force release", k)

	got := make(chan *Lock)
	go func() {
		w, err := l.Acquire(ctx, "k", lockcore.Wait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	waitForWaiters(t, l, "k", 1)
	k.Release(ctx)
	k = <-got
	next("a hand-over", k)

	r, err := l.Resume(ctx, "k", k.Token())
	if err != nil || r.Fence() != k.Fence() {
		t.Fatalf("resume: fence %v, %v; want %d", r, err, k.Fence())
	}
	k.Release(ctx)

	rdb := redistest.Client(t)
	if err := rdb.Del(ctx, keysFor(l.prefix, "k").fence).Err(); err != nil {
		t.Fatal(err)
	}
	k, _ = l.Acquire(ctx, "k")
	next("the loss of the fence counter", k)
	k.Release(ctx)

	// A counter ahead of the server clock (the clock stepped back): the
	// next fence is one above the counter, not the clock.
	ahead := time.Now().Add(time.Hour).UnixMicro()
	if err := rdb.Set(ctx, keysFor(l.prefix, "k").fence, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	k, _ = l.Acquire(ctx, "k")
	if k.Fence() != ahead+1 {
		t.Errorf("fence %d with the counter at %d ahead of the clock, want %d", k.Fence(), ahead, ahead+1)
	}
	next("a counter ahead of the clock", k)
	k.Release(ctx)
}

// IsLocked and the TTL report what Redis has.
func TestIsLockedAndTTL(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	if held, err := l.IsLocked(ctx, "k"); err != nil || held {
		t.Fatalf("IsLocked on a free key = %v, %v", held, err)
	}
	k, err := l.Acquire(ctx, "k", lockcore.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if held, err := l.IsLocked(ctx, "k"); err != nil || !held {
		t.Fatalf("IsLocked on a held key = %v, %v", held, err)
	}
	if err := k.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if left, err := k.TTL(ctx); err != nil || left <= 10*time.Second || left > 20*time.Second {
		t.Fatalf("TTL after Extend(20s) = %v, %v", left, err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c := context.Cause(k.Context()); !errors.Is(c, ErrReleased) {
		t.Errorf("cause after release = %v, want ErrReleased", c)
	}
	if err := k.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("second release: %v, want ErrNotHeld", err)
	}
}

func TestHealthy(t *testing.T) {
	l := newLocker(t, Options{})
	if err := l.Healthy(context.Background()); err != nil {
		t.Fatalf("Healthy: %v", err)
	}
}

// A prefix with a space still hands over: the waiter's registration names
// its Locker's channel, which the space split, so the release took the
// waiter for dead and dropped it (the waiter then got the key only by its
// backstop poll, and Inspect did not list it).
func TestPrefixWithSpaceHandsOver(t *testing.T) {
	prefix := redistest.Prefix(t) + "two words:"
	holder := newLocker(t, Options{Prefix: prefix})
	waiter := newLocker(t, Options{Prefix: prefix, Owner: "waiter"})
	ctx := context.Background()
	k, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wk, err := waiter.Acquire(ctx, "k", lockcore.Wait(30*time.Second))
		if err == nil {
			err = wk.Release(ctx)
		}
		got <- err
	}()
	if ws := waitForWaiters(t, holder, "k", 1); ws[0].Owner != "waiter" {
		t.Fatalf("waiters %+v", ws)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if st := holder.Stats(); st.HandOvers != 1 {
		t.Errorf("release handed over %d times, want 1 (the waiter was dropped)", st.HandOvers)
	}
}

// TryAcquire is Acquire with a single try, whatever the Locker's Wait.
func TestTryAcquire(t *testing.T) {
	l := newLocker(t, Options{Wait: time.Hour})
	ctx := context.Background()
	k, err := l.TryAcquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	if left, err := k.TTL(ctx); err != nil || left <= 30*time.Second {
		t.Errorf("lockcore.TTL(time.Minute) ignored: %v, %v", left, err)
	}
	got, err := l.TryAcquire(ctx, "k")
	if got != nil || !errors.Is(err, ErrLocked) {
		t.Fatalf("TryAcquire on a held key = %v, %v; want nil and ErrLocked", got, err)
	}
	if st := l.Stats(); st.Waited != 0 {
		t.Errorf("TryAcquire waited: %+v", st)
	}
}

// Err is nil while held, wraps ErrLost once the hold is lost (also after a
// later Release) and ErrReleased after Release, like lockcore's.
func TestErr(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "released")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Err(); err != nil {
		t.Fatalf("Err while held = %v", err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := k.Err(); !errors.Is(err, ErrReleased) || errors.Is(err, ErrLost) {
		t.Errorf("Err after Release = %v, want ErrReleased", err)
	}

	k, err = l.Acquire(ctx, "forced")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ForceRelease(ctx, "forced", "test"); err != nil {
		t.Fatal(err)
	}
	if err := k.Extend(ctx, time.Minute); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Extend after a force release = %v", err)
	}
	if err := k.Err(); !errors.Is(err, ErrLost) {
		t.Errorf("Err after the loss = %v, want ErrLost", err)
	}
	_ = k.Release(ctx)
	if err := k.Err(); !errors.Is(err, ErrLost) {
		t.Errorf("Err after the loss and a Release = %v, want ErrLost", err)
	}

	// A lease that ran out is lost at the first look, not a timer's tick later.
	k, err = l.Acquire(ctx, "expired", lockcore.TTL(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "the key expires", func() bool {
		held, err := l.IsLocked(ctx, "expired")
		return err == nil && !held
	})
	if err := k.Err(); !errors.Is(err, ErrLost) {
		t.Errorf("Err after the TTL passed = %v, want ErrLost", err)
	}
}
