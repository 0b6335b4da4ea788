package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// The README: "A failed or cancelled Acquire takes back what it may have
// left (its registration, ...)", also when it failed on an error reply. A
// waiter queued behind a holder whose poll Redis answers with OOM returns
// the reply and leaves no registration: once memory is back, the holder's
// release hands the key to nobody, and a try takes it at once (a
// registration left behind would be handed a grant that blocks the key
// for HandOverTTL).
func TestOOMQueuedWaiterTakesBackRegistration(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	ctx := context.Background()
	holder := lockerOn(t, rdb, Options{Owner: "holder"})
	waiter := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "waiter", Wait: 5 * time.Second})
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
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	lift := func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") }
	defer lift()
	err = <-done
	lift()
	t.Logf("queued Acquire under OOM: %v", err)
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("queued Acquire under OOM: %v; want the OOM reply", err)
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
}
