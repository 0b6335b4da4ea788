//go:build attack

package redislock

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestAttackLateWithdrawRacesHandover: a cancelled waiter W, first in
// the queue, whose take-back Redis answers BUSY past the clean-up bound,
// and a waiter X queued behind it (whose own poll is answered BUSY: it
// fails closed with the reply, as the README says, and takes back late
// too). When BUSY ends, the holder's release (sent again until Redis takes
// it) and the late withdraws reach Redis together: the release may hand
// the key to a gone waiter, whose withdraw must then pass it on. Either
// way the key ends free, with no registration left, well before the
// holder's 5-minute TTL: another Locker's try takes it, with a fence
// above the holder's.
func TestAttackLateWithdrawRacesHandover(t *testing.T) {
	for round := range 4 {
		srv := redistest.Private(t)
		ctx := context.Background()
		holder := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "holder", TTL: 5 * time.Minute})
		w := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "gone", Wait: time.Minute})
		x := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "behind", Wait: time.Minute})
		other := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "other"})
		h, err := holder.Acquire(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		wdone := make(chan error, 1)
		go func() {
			l, err := w.Acquire(wctx, "k")
			if err == nil {
				_ = l.Release(ctx)
			}
			wdone <- err
		}()
		waitForWaiters(t, holder, "k", 1)
		xdone := make(chan error, 1)
		go func() {
			l, err := x.Acquire(ctx, "k")
			if err == nil {
				_ = l.Release(ctx)
			}
			xdone <- err
		}()
		waitForWaiters(t, holder, "k", 2)
		stop := makeBusy(t, srv)
		cancel()
		for _, done := range []chan error{wdone, xdone} {
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a waiter got the key while it was held")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a waiter's Acquire did not return 30s later under BUSY")
			}
		}
		released := make(chan error, 1)
		go func() {
			for {
				err := h.Release(ctx)
				if err == nil || !busyReply(err) {
					released <- err
					return
				}
				time.Sleep(time.Millisecond) // a retry's pause, not a synchronisation
			}
		}()
		time.Sleep(time.Duration(round) * 3 * time.Millisecond) // vary the race, not a synchronisation
		stop()
		if err := <-released; err != nil {
			t.Fatalf("round %d: the holder's release: %v", round, err)
		}
		var l *Lock
		pgtest.Eventually(t, "the key free again, no registration left", func() bool {
			if len(waiters(t, holder, "k")) != 0 {
				return false
			}
			l, err = other.TryAcquire(ctx, "k")
			return err == nil
		})
		if l.Fence() <= h.Fence() {
			t.Errorf("round %d: fence %d after the holder's %d", round, l.Fence(), h.Fence())
		}
		_ = l.Release(ctx)
	}
}

// TestAttackLateWithdrawAfterClose: the background withdraw of a waiter
// whose take-back Redis answered BUSY past the bound must not outlive the
// Locker's client: once the client is closed (the Locker closed first),
// no goroutine of the package is left running, even while Redis stays
// busy.
func TestAttackLateWithdrawAfterClose(t *testing.T) {
	srv := redistest.Private(t)
	ctx := context.Background()
	holder := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "holder", TTL: 5 * time.Minute})
	rdb := redistest.ClientOf(t, srv)
	w := lockerOn(t, rdb, Options{Owner: "gone", Wait: time.Minute})
	if _, err := holder.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() {
		_, err := w.Acquire(wctx, "k")
		wdone <- err
	}()
	waitForWaiters(t, holder, "k", 1)
	makeBusy(t, srv)
	cancel()
	if err := <-wdone; err == nil {
		t.Fatal("the cancelled waiter got the key")
	}
	w.Close()
	rdb.Close()
	pgtest.Eventually(t, "no withdraw goroutine left once the client is closed", func() bool {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		return !strings.Contains(string(buf), "withdrawLate")
	})
}
