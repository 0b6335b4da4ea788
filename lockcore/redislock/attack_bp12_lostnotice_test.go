//go:build attack

package redislock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestAttackLostHandOverNotice: the README's "Waiters also poll as a
// backstop (pub/sub is fire-and-forget) ... at least every 500ms", for the
// notice of a hand-over. The waiter's registration is made to name a
// channel nobody listens on just before the holder's release, so the
// release hands the key to the waiter and its notice reaches nobody: the
// waiter still gets the key at its next poll, within maxPoll (and well
// within the 2s hand-over grant), fence higher.
func TestAttackLostHandOverNotice(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	ctx := context.Background()
	holder := lockerOn(t, rdb, Options{Owner: "holder"})
	waiter := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "waiter"})
	h, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := acquireLater(ctx, waiter, "k")
	ws := waitForWaiters(t, holder, "k", 1)
	ks := keysFor(holder.prefix, "k")
	// The registration: "deadline ttl channel owner"; its channel swapped
	// for one nobody listens on (the waiter's next poll writes it back: the
	// swap and the release come within a millisecond of each other).
	tok := ws[0].Token
	full, err := rdb.HKeys(ctx, ks.info).Result()
	if err != nil || len(full) != 1 || !strings.HasPrefix(full[0], tok) {
		t.Fatalf("the registration's token: %v, %v (inspected %q)", full, err, tok)
	}
	swap := `local v = redis.call('HGET', KEYS[1], ARGV[1])
local d, ttl, ch, owner = string.match(v, '^(%S+) (%S+) (%S+) (.*)$')
redis.call('HSET', KEYS[1], ARGV[1], d .. ' ' .. ttl .. ' nobody-listens ' .. owner)
return ch`
	ch, err := rdb.Eval(ctx, swap, []string{ks.info}, full[0]).Text()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	to, _ := rdb.HGet(ctx, ks.hold, "c").Result()
	t.Logf("the waiter's channel %s; the release handed the key to the registration naming %q", ch, to)
	l := grantedWithin(t, got, start, maxPoll+roundTrips, 5*time.Second)
	if l.Fence() <= h.Fence() {
		t.Errorf("the waiter's fence %d not above the holder's %d", l.Fence(), h.Fence())
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("the waiter's release: %v", err)
	}
}
