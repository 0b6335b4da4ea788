package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/lockcore"
)

// Promise (hand-over, arrival order): more dead registrations at the
// queue's head than one script drops (pophead stops at 100, since a script
// blocks Redis while it runs) neither starve the live waiter queued behind
// them nor let a newcomer take the key ahead of it. The release drops the
// first 100 and frees the key, with nobody to tell; the live waiter's next
// poll (within maxPoll) and its polls after that (at once while the key
// is free) drop 100 each until it reaches itself: within maxPoll plus a
// round trip per 100 dead. A try in between is refused: the key belongs
// to the queue. The grant's fence is above every earlier grant's.
func TestManyDeadQueueHeads(t *testing.T) {
	ctx := context.Background()
	const dead = 250 // past what the release and a newcomer's try drop together
	holder := newLocker(t, Options{Owner: "holder"})
	old, err := holder.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}

	// Registrations of waiters that died long ago, queued ahead: written by
	// the acquire script itself, with a registration TTL of 100ms, in one
	// transaction that then keeps the queue's keys (whose TTL each
	// registration sets) for a minute, as a live waiter's polls would.
	ks := keysFor(holder.prefix, "k")
	if err := acquireScript.Load(ctx, holder.rdb).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i := range dead {
			acquireScript.EvalSha(ctx, p, ks.all(), fmt.Sprintf("dead%03d", i), ms(time.Minute), "dead", "nobody", "w", 100)
		}
		p.PExpire(ctx, ks.queue, time.Minute)
		p.PExpire(ctx, ks.info, time.Minute)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	registered, err := holder.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// By Redis's clock every one has lapsed once 100ms have passed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, err := holder.rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if now.Sub(registered) > 110*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Redis's clock did not move")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The live waiter queues behind them, and is held at its first wait
	// (the awaiting hook) until the release and a newcomer's try are done:
	// its own polls would otherwise race the newcomer's.
	parked, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	awaiting.set(func() {
		once.Do(func() {
			close(parked)
			<-gate
		})
	})
	t.Cleanup(awaiting.clear)
	live := newLocker(t, Options{Prefix: holder.prefix, Owner: "live"})
	got := acquireLater(ctx, live, "k")
	within(t, "the live waiter is queued and waits", parked, 5*time.Second)
	if n, err := holder.rdb.ZCard(ctx, ks.queue).Result(); err != nil || n != dead+1 {
		t.Fatalf("the queue holds %d registrations (%v), want %d dead and the live one", n, err, dead)
	}

	if err := old.Release(ctx); err != nil {
		close(gate)
		t.Fatal(err)
	}
	start := time.Now()
	newcomer := newLocker(t, Options{Prefix: holder.prefix, Owner: "newcomer"})
	if l, err := newcomer.TryAcquire(ctx, "k"); err == nil {
		close(gate)
		t.Fatalf("a newcomer's try took the key (fence %d) ahead of the live waiter queued behind %d dead registrations",
			l.Fence(), dead)
	} else if !errors.Is(err, lockcore.ErrLocked) {
		close(gate)
		t.Fatalf("the newcomer's try: %v, want ErrLocked", err)
	}
	close(gate)

	bound := maxPoll + time.Duration(dead/100+1)*50*time.Millisecond + roundTrips
	lv := grantedWithin(t, got, start, bound, 5*time.Second)
	if lv.Fence() <= old.Fence() {
		t.Errorf("live fence %d not above the holder's %d", lv.Fence(), old.Fence())
	}
	if n, err := holder.rdb.Exists(ctx, ks.queue).Result(); err != nil || n != 0 {
		t.Errorf("the queue is still there (%d, %v) once its last live waiter got the key", n, err)
	}
	if err := lv.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
