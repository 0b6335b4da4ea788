package redislock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// makeBusy runs a read-only script past busy-reply-threshold on srv, so
// every other command is answered BUSY, and returns once srv says BUSY.
// stop ends the script (SCRIPT KILL) and returns once it has ended; the
// test's cleanup stops it too.
func makeBusy(t *testing.T, srv *redisserver.Server) (stop func()) {
	t.Helper()
	ctx := context.Background()
	admin := redistest.ClientOf(t, srv)
	if err := admin.ConfigSet(ctx, "lua-time-limit", "10").Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		admin.Eval(context.Background(), "local i = 0 while true do i = i + 1 end", nil)
	}()
	probe := redistest.ClientOf(t, srv)
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		k := redistest.ClientOf(t, srv)
		deadline := time.Now().Add(10 * time.Second)
		for k.ScriptKill(context.Background()).Err() != nil && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		<-done
	}
	t.Cleanup(stop)
	pgtest.Eventually(t, "the server answers BUSY", func() bool {
		err := probe.Ping(ctx).Err()
		return err != nil && strings.HasPrefix(err.Error(), "BUSY")
	})
	return stop
}

// TestBusyOutlastsTheCleanup: a cancelled waiter whose take-back Redis
// answers BUSY for longer than the clean-up bound returns at that bound,
// and still takes its registration back once Redis answers again, before
// the registration would expire by itself: the holder's release then
// hands the key to nobody. Before, the registration stayed until it
// expired and the release made the gone waiter the key's holder.
func TestBusyOutlastsTheCleanup(t *testing.T) {
	// A registration, and a hold, that outlive the test: only the
	// take-back can remove the registration.
	defer func(d time.Duration) { waiterTTL = d }(waiterTTL)
	waiterTTL = 90 * time.Second
	srv := redistest.Private(t)
	ctx := context.Background()
	holder := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "holder", TTL: 5 * time.Minute})
	waiter := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "waiter", Wait: time.Minute})
	other := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "other"})
	h, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(wctx, "k")
		if err == nil {
			_ = l.Release(ctx)
		}
		done <- err
	}()
	waitForWaiters(t, holder, "k", 1)
	stop := makeBusy(t, srv)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the waiter got the key while it was held")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled waiter's Acquire did not return 30s later under BUSY")
	}
	stop()
	pgtest.Eventually(t, "the cancelled waiter's registration is taken back", func() bool {
		return len(waiters(t, holder, "k")) == 0
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := other.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire after the holder's release: %v: the gone waiter's registration was handed the key", err)
	}
	_ = l.Release(ctx)
}
