//go:build attack

package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestAttackRingHandOverByPoll: the README's Ring paragraph: "Locks stay
// correct ..., but waiters wait by their 500ms poll". A key whose hold
// sits on the other shard than every waiter's channel (so no notice can
// reach them) is handed along a queue of three waiters, each on a Locker
// of its own on the same Ring: every waiter gets it within a poll of the
// release before it (and well within the 2s hand-over claim, which a
// waiter that only polls must take up before it lapses), fences rising.
func TestAttackRingHandOverByPoll(t *testing.T) {
	one, two := redistest.Private(t), redistest.Private(t)
	shards := map[string]*redisserver.Server{"a": one, "b": two}
	prefix := redistest.Prefix(t)
	holder := lockerOn(t, ring(t, shards), Options{Prefix: prefix, Owner: "holder"})
	var waiters []*Locker
	for len(waiters) < 3 {
		waiters = append(waiters, lockerOn(t, ring(t, shards), Options{Prefix: prefix, Owner: "waiter"}))
	}
	r := ring(t, shards)
	shardOf := func(k string) string {
		c, err := r.GetShardClientForKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().Addr
	}
	// Make every waiter's channel hash to one shard, then pick a key held
	// on the other.
	for i, w := range waiters {
		for shardOf(w.channel) != shardOf(waiters[0].channel) {
			w = lockerOn(t, ring(t, shards), Options{Prefix: prefix, Owner: "waiter"})
			waiters[i] = w
		}
	}
	key := ""
	for i := 0; key == ""; i++ {
		k := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
		if shardOf(keysFor(prefix, k).hold) != shardOf(waiters[0].channel) {
			key = k
		}
	}
	ctx := context.Background()
	h, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var got []<-chan acquired
	for i, w := range waiters {
		got = append(got, acquireLater(ctx, w, key))
		waitForWaiters(t, holder, key, i+1) // arrival order: waiters[i] is i-th
	}
	prev := h
	for i := range waiters {
		start := time.Now()
		if err := prev.Release(ctx); err != nil {
			t.Fatalf("release before waiter %d: %v", i, err)
		}
		l := grantedWithin(t, got[i], start, maxPoll+roundTrips, 5*time.Second)
		if l.Fence() <= prev.Fence() {
			t.Errorf("waiter %d's fence %d not above the one before's %d", i, l.Fence(), prev.Fence())
		}
		prev = l
	}
	if err := prev.Release(ctx); err != nil {
		t.Error(err)
	}
}
