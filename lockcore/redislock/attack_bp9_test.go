//go:build attack

package redislock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestAttackBusyQueuedWaiterTakesBack: the README's "a failed or
// cancelled Acquire takes back what it may have left", with Redis
// answering BUSY (a script past lua-time-limit) while a waiter is queued:
// the waiter returns the BUSY reply and no Lock, and once BUSY ends (300ms
// after the waiter begins to take back, well within the 3s a registration
// lives) its registration is gone and the
// holder's release hands the key to nobody: a try takes it at once.
func TestAttackBusyQueuedWaiterTakesBack(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	ctx := context.Background()
	holder := lockerOn(t, rdb, Options{Owner: "holder"})
	waiter := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "waiter", Wait: time.Second})
	other := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "other"})
	h, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// BUSY ends 300ms after the waiter begins to take back what it left
	// (set before the waiter starts: it reads the hook).
	withdrawing := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { beforeWithdraw = nil })
	beforeWithdraw = func() { once.Do(func() { close(withdrawing) }) }
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "k")
		if err == nil {
			_ = l.Release(ctx)
		}
		done <- err
	}()
	waitForWaiters(t, holder, "k", 1)
	kill := makeBusy(t, srv)
	select {
	case <-withdrawing:
	case <-time.After(10 * time.Second):
		kill()
		t.Fatal("the waiter's 1s wait did not end 10s later under BUSY")
	}
	time.Sleep(300 * time.Millisecond) // how long BUSY lasts, not a synchronisation
	kill()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter's Acquire still under way 10s after BUSY ended")
	}
	t.Logf("queued waiter under BUSY: %v", werr)
	if werr == nil {
		t.Fatal("the waiter got the key while it was held")
	}
	if ws := waiters(t, holder, "k"); len(ws) != 0 {
		t.Errorf("the failed waiter left %d registrations: %+v", len(ws), ws)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := other.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire after the holder's release: %v: the failed waiter's registration was handed the key", err)
	}
	_ = l.Release(ctx)
	if !errors.Is(werr, ErrTimeout) && !strings.Contains(werr.Error(), "BUSY") {
		t.Errorf("waiter's error %v: want ErrTimeout or the BUSY reply", werr)
	}
}
