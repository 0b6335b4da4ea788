package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Issue 31, fault 3: a hand-over was timed from when its notice arrived,
// not from when Redis granted it, so with a slow pub/sub delivery the new
// holder believed it held the key after Redis had let it go. The estimate
// must never pass the latest moment Redis can expire the key.
func TestHandOverEstimateNotLate(t *testing.T) {
	const delay = 200 * time.Millisecond     // pub/sub delivery
	t.Cleanup(func() { beforeNotice = nil }) // after the Lockers' listeners stop
	beforeNotice = func() { time.Sleep(delay) }
	holder := newLocker(t, Options{Owner: "holder"})
	waiter := newLocker(t, Options{Prefix: holder.prefix, Owner: "waiter"})
	ctx := context.Background()
	k, err := holder.Acquire(ctx, "k", lockcore.TTL(time.Second))
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
	pttl, err := holder.rdb.PTTL(ctx, holder.prefix+"k").Result()
	latest := time.Now().Add(pttl + time.Millisecond) // Redis expires the key no later than this
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	deadline := w.deadline
	w.mu.Unlock()
	if deadline.After(latest) {
		t.Errorf("the new holder counts on the key %v after Redis may have expired it", deadline.Sub(latest))
	}
	w.Release(ctx)
}
