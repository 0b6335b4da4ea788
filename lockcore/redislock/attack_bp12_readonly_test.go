//go:build attack

package redislock

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// withdraws is a go-redis hook that counts the withdraw scripts a client
// sends (by hash, or by source after NOSCRIPT).
type withdraws struct{ n atomic.Int64 }

func (c *withdraws) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *withdraws) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && isWithdraw(a[1]) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *withdraws) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func isWithdraw(arg any) bool {
	s, ok := arg.(string)
	return ok && (s == withdrawScript.Hash() || fmt.Sprintf("%x", sha1.Sum([]byte(s))) == withdrawScript.Hash())
}

// TestAttackReadOnlyTryLeavesNothing: an acquire whose only try a replica
// refused (READONLY) wrote nothing, and sends no take-back: with the
// take-back tried again while Redis answers READONLY, a client pointed at
// a replica by mistake would otherwise keep one going, in the background,
// for every failed acquire.
func TestAttackReadOnlyTryLeavesNothing(t *testing.T) {
	srv := redistest.Private(t)
	admin := redistest.ClientOf(t, srv)
	ctx := context.Background()
	if err := admin.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redistest.ClientOf(t, srv)
	sent := &withdraws{}
	rdb.AddHook(sent)
	l := lockerOn(t, rdb, Options{Owner: "misdirected", Wait: replyWait})
	for _, try := range []bool{true, false} {
		var err error
		if try {
			_, err = l.TryAcquire(ctx, "k")
		} else {
			_, err = l.Acquire(ctx, "k")
		}
		if err == nil || !strings.Contains(err.Error(), "READONLY") {
			t.Fatalf("acquire (try %v) on a replica: %v; want the READONLY reply", try, err)
		}
	}
	if n := sent.n.Load(); n != 0 {
		t.Errorf("%d take-backs sent after tries a replica refused", n)
	}
}
