//go:build attack

package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestAttackReadOnlyQueuedWaiterTakesBack: the README's "a failed or
// cancelled Acquire takes back what it may have left ... so a release
// never hands the key to a waiter that is gone", with Redis answering
// READONLY while a waiter is queued: the server is demoted (REPLICAOF a
// master that cannot be reached, so it keeps its dataset) and promoted
// again soon after, as in a failover that went back, or one whose promoted
// replica had the registration. The waiter returns the READONLY reply and
// no Lock; once the server takes writes again its registration is gone and
// the holder's release hands the key to nobody: a try takes it at once.
func TestAttackReadOnlyQueuedWaiterTakesBack(t *testing.T) {
	// A registration that outlives the test: one left is not mistaken for
	// one taken back when it expires by itself.
	defer func(d time.Duration) { waiterTTL = d }(waiterTTL)
	waiterTTL = 90 * time.Second
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	ctx := context.Background()
	holder := lockerOn(t, rdb, Options{Owner: "holder"})
	waiter := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "waiter", Wait: 10 * time.Second})
	other := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "other"})
	h, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "k")
		if err == nil {
			_ = l.Release(ctx)
		}
		done <- err
	}()
	waitForWaiters(t, holder, "k", 1)
	admin := redistest.ClientOf(t, srv)
	if err := admin.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	promote := func() {
		if err := admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
			t.Errorf("REPLICAOF NO ONE: %v", err)
		}
	}
	demoted := time.Now()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(20 * time.Second):
		promote()
		t.Fatal("the waiter's Acquire still under way 20s after READONLY began")
	}
	// Promoted again 300ms after the waiter returned.
	time.Sleep(300 * time.Millisecond) // how long READONLY outlasts the waiter, not a synchronisation
	promote()
	t.Logf("queued waiter under READONLY, %v after the demotion: %v", time.Since(demoted), werr)
	if werr == nil || errors.Is(werr, ErrUnavailable) || !strings.Contains(werr.Error(), "READONLY") {
		t.Errorf("queued Acquire under READONLY: %v; want the READONLY reply", werr)
	}
	// A take-back going on in the background is given 10s to end once the
	// server takes writes again.
	deadline := time.Now().Add(10 * time.Second)
	for len(waiters(t, holder, "k")) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	left := waiters(t, holder, "k")
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := other.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire after the holder's release: %v (registrations left before it: %+v): the failed waiter's registration was handed the key", err, left)
	}
	_ = l.Release(ctx)
}
