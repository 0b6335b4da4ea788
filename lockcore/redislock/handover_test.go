package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Issue 31, fault 3: a hand-over was timed from when its notice arrived,
// not from when Redis granted it, so with a slow pub/sub delivery the new
// holder believed it held the key after Redis had let it go. The estimate
// must never pass the latest moment Redis can expire the key.
func TestHandOverEstimateNotLate(t *testing.T) {
	const delay = 200 * time.Millisecond // pub/sub delivery
	t.Cleanup(beforeNotice.clear)        // after the Lockers' listeners stop
	beforeNotice.set(func() { time.Sleep(delay) })
	holder := newLocker(t, Options{Owner: "holder"})
	waiter := newLocker(t, Options{Prefix: holder.prefix, Owner: "waiter"})
	ctx := context.Background()
	k, err := holder.Acquire(ctx, "k", lockcore.TTL(time.Minute)) // held until the Release below, however slow the box
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lock, 1)
	go func() {
		w, err := waiter.Acquire(ctx, "k", lockcore.Wait(10*time.Second), lockcore.TTL(time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	waitForWaiters(t, holder, "k", 1)
	// The notice must be what wakes it: the listener is subscribed.
	pgtest.Eventually(t, "the waiter's listener is subscribed", func() bool {
		n, err := holder.rdb.PubSubNumSub(ctx, waiter.channel).Result()
		return err == nil && n[waiter.channel] == 1
	})
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		t.FailNow()
	}
	// The estimate first: the take-up (issue 26) may extend the key in
	// Redis and then the estimate at any moment, and Redis's expiry only
	// moves later here, so an estimate read before the PTTL must not pass
	// the expiry the PTTL gives.
	w.mu.Lock()
	deadline := w.deadline
	w.mu.Unlock()
	pttl, err := holder.rdb.PTTL(ctx, holder.prefix+"k").Result()
	latest := time.Now().Add(pttl + time.Millisecond) // Redis expires the key no later than this
	if err != nil {
		t.Fatal(err)
	}
	if deadline.After(latest) {
		t.Errorf("the new holder counts on the key %v after Redis may have expired it", deadline.Sub(latest))
	}
	w.Release(ctx)
}

// counting is a go-redis hook that counts the scripts on a lock's four
// keys (acquire's tries and polls, release, withdraw) a client sends.
type counting struct{ n atomic.Int64 }

func (c *counting) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counting) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 2 && fmt.Sprint(a[2]) == "4" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *counting) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// handOverCase is a holder holding "k" and a waiter waiting for it, whose
// listener is subscribed; sent counts the waiter's requests, got is its
// Acquire's Lock.
type handOverCase struct {
	holder, waiter *Locker
	k              *Lock
	sent           *counting
	got            chan *Lock
}

func handOverSetup(t *testing.T) *handOverCase {
	t.Helper()
	ctx := context.Background()
	h := &handOverCase{holder: newLocker(t, Options{Owner: "holder"}), sent: &counting{}, got: make(chan *Lock, 1)}
	rdb := redis.NewClient(redistest.Client(t).Options())
	t.Cleanup(func() { rdb.Close() })
	rdb.AddHook(h.sent)
	h.waiter = lockerOn(t, rdb, Options{Prefix: h.holder.prefix, Owner: "waiter"})
	// Subscribed in Redis is not enough: the waiter polls once when its
	// client sees the subscription confirmed, and a release racing that
	// poll grants by the poll (seen under load). awaiting says it is past it.
	idle := make(chan struct{}, 1)
	awaiting.set(func() {
		select {
		case idle <- struct{}{}:
		default:
		}
	})
	t.Cleanup(awaiting.clear)
	var err error
	if h.k, err = h.holder.Acquire(ctx, "k", lockcore.TTL(time.Minute)); err != nil {
		t.Fatal(err)
	}
	go func() {
		w, err := h.waiter.Acquire(ctx, "k", lockcore.Wait(10*time.Second), lockcore.TTL(time.Minute))
		if err != nil {
			t.Error(err)
		}
		h.got <- w
	}()
	select {
	case <-idle:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter never waited for a notice with its subscription confirmed")
	}
	waitForWaiters(t, h.holder, "k", 1)
	return h
}

// Issue 26: a hand-over took two round trips (the release, then the
// waiter's poll taking the claim up), 980 µs against 130 µs for one. The
// waiter now returns on the release's notice, sending nothing first, with
// the grant's fence, and takes the claim up to its TTL afterwards (an
// extend, not a poll).
func TestHandOverReturnsOnTheNotice(t *testing.T) {
	ctx := context.Background()
	h := handOverSetup(t)
	var atNotice atomic.Int64
	t.Cleanup(beforeNotice.clear)
	beforeNotice.set(func() { atNotice.Store(h.sent.n.Load()) })
	if err := h.k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-h.got
	if w == nil {
		t.FailNow()
	}
	defer w.Release(ctx)
	if n := h.sent.n.Load() - atNotice.Load(); n > 0 {
		t.Errorf("the waiter polled %d times between the notice and its return, want none", n)
	}
	f, err := h.holder.rdb.HGet(ctx, h.holder.prefix+"k", "f").Int64()
	if err != nil || f != w.Fence() || f <= h.k.Fence() {
		t.Errorf("fence %d (in Redis %d, released %d), %v", w.Fence(), f, h.k.Fence(), err)
	}
	pgtest.Eventually(t, "the claim is taken up to the TTL", func() bool {
		pttl, err := h.holder.rdb.PTTL(ctx, h.holder.prefix+"k").Result()
		return err == nil && pttl > HandOverTTL
	})
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
}

// A hand-over whose key is gone before the waiter takes it up (here
// deleted under it, as an expiry or a failover would) is a lost lock: the
// take-up finds it and cancels the lock's context.
func TestHandOverTakeUpFindsKeyGone(t *testing.T) {
	ctx := context.Background()
	h := handOverSetup(t)
	t.Cleanup(beforeNotice.clear)
	beforeNotice.set(func() { h.holder.rdb.Del(ctx, h.holder.prefix+"k") })
	if err := h.k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-h.got
	if w == nil {
		t.FailNow()
	}
	within(t, "the lock is lost", w.Done(), 10*time.Second)
	if !errors.Is(context.Cause(w.Context()), ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(w.Context()))
	}
}

// A notice that cannot be a grant made after the waiter's last try (its
// fence is not above the holder's that try saw) is no grant: the waiter
// polls, finds the key held and waits on.
func TestHandOverStaleNoticeIgnored(t *testing.T) {
	ctx := context.Background()
	h := handOverSetup(t)
	h.waiter.mu.Lock()
	var tok string
	for tok = range h.waiter.waiters {
	}
	h.waiter.mu.Unlock()
	before := h.sent.n.Load()
	stale := fmt.Sprintf("g %s %d %d", tok, h.k.Fence(), ms(HandOverTTL))
	if err := h.holder.rdb.Publish(ctx, h.waiter.channel, stale).Err(); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "the waiter polls", func() bool { return h.sent.n.Load() > before })
	select {
	case w := <-h.got:
		t.Fatalf("the waiter took a stale notice for a grant (fence %d)", w.Fence())
	default:
	}
	if err := h.k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if w := <-h.got; w == nil || w.Fence() <= h.k.Fence() {
		t.Fatal("no grant after the release")
	} else {
		w.Release(ctx)
	}
}
