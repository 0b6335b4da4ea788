//go:build attack

package redislock

import (
	"context"
	"errors"
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

// TestAttackRingForceReleaseFoundAtNextExtend: the README's Ring
// paragraph: "a force release is found at the holder's next extend" (its
// notice goes to the hold's shard, the holder listens on its channel's).
// A With on a Ring whose hold is force-released sees its context cancelled
// with cause ErrLost within a third of the TTL (With's extend period), and
// With returns ErrLost; the key's next holder has a higher fence.
func TestAttackRingForceReleaseFoundAtNextExtend(t *testing.T) {
	one, two := redistest.Private(t), redistest.Private(t)
	shards := map[string]*redisserver.Server{"a": one, "b": two}
	prefix := redistest.Prefix(t)
	admin := lockerOn(t, ring(t, shards), Options{Prefix: prefix, Owner: "admin"})
	// A holder whose channel hashes to the other shard than k's hold, so
	// that the force release's notice cannot reach it.
	r := ring(t, shards)
	shardOf := func(k string) string {
		c, err := r.GetShardClientForKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().Addr
	}
	holder := lockerOn(t, ring(t, shards), Options{Prefix: prefix, Owner: "holder", TTL: 3 * time.Second})
	for shardOf(holder.channel) == shardOf(keysFor(prefix, "k").hold) {
		holder = lockerOn(t, ring(t, shards), Options{Prefix: prefix, Owner: "holder", TTL: 3 * time.Second})
	}
	ctx := context.Background()
	// The fence before the With's grant: the grant's is above it, the next
	// holder's above that.
	before, err := admin.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var forcedAt, noticed time.Time
	var cause error
	err = holder.With(ctx, "k", func(ctx context.Context) error {
		ok, err := admin.ForceRelease(context.Background(), "k", "bp14")
		forcedAt = time.Now()
		if err != nil || !ok {
			t.Errorf("ForceRelease: %v, %v", ok, err)
		}
		select {
		case <-ctx.Done():
			noticed, cause = time.Now(), context.Cause(ctx)
		case <-time.After(10 * time.Second):
		}
		return nil
	})
	if noticed.IsZero() {
		t.Fatal("the holder's context not cancelled 10s after the force release (TTL 3s)")
	}
	took := noticed.Sub(forcedAt)
	t.Logf("the holder's context cancelled %v after the force release", took.Round(time.Millisecond))
	if bound := time.Second + roundTrips; took > bound {
		t.Errorf("the holder learnt of the force release %v after it, over a third of the TTL and its round trips (%v)", took.Round(time.Millisecond), bound)
	}
	if !errors.Is(cause, ErrLost) || !errors.Is(err, ErrLost) {
		t.Errorf("cause %v, With's error %v; want ErrLost", cause, err)
	}
	next, err := admin.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if next.Fence() < before.Fence()+2 {
		t.Errorf("the next holder's fence %d, the one before the forced hold's %d: not above the forced one's", next.Fence(), before.Fence())
	}
}
