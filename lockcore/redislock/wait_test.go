package redislock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// waiters returns key's registered waiters now.
func waiters(t testing.TB, l *Locker, key string) []redislocks.Waiter {
	t.Helper()
	tbl, err := inspect(context.Background(), l, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range tbl.Locks {
		if in.Key == key {
			return in.Waiters
		}
	}
	return nil
}

// waitForWaiters polls Inspect until key has n registered waiters.
func waitForWaiters(t testing.TB, l *Locker, key string, n int) []redislocks.Waiter {
	t.Helper()
	var ws []redislocks.Waiter
	pgtest.Eventually(t, fmt.Sprintf("%s has %d waiters", key, n), func() bool {
		tbl, err := inspect(context.Background(), l, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range tbl.Locks {
			if in.Key == key {
				ws = in.Waiters
				return len(ws) == n
			}
		}
		return n == 0
	})
	return ws
}

// Waiters get the key in arrival order, each handed over by the release
// itself, and a monitor sees the queue.
func TestHandOverInArrivalOrder(t *testing.T) {
	holder := newLocker(t, Options{Owner: "holder"})
	ctx := context.Background()
	k, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	names := []string{"w1", "w2", "w3"}
	for i, name := range names {
		w := lockerOn(t, redistest.Client(t), Options{Prefix: holder.prefix, Owner: name})
		wg.Go(func() {
			lk, err := w.Acquire(ctx, "k", lockcore.Wait(30*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			lk.Release(ctx)
		})
		waitForWaiters(t, holder, "k", i+1)
	}
	ws := waitForWaiters(t, holder, "k", 3)
	for i, w := range ws {
		if w.Owner != names[i] {
			t.Errorf("waiter %d is %s, want %s", i, w.Owner, names[i])
		}
		if i > 0 && w.Since.Before(ws[i-1].Since) {
			t.Errorf("waiter %d since %v, before waiter %d", i, w.Since, i-1)
		}
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if strings.Join(order, ",") != "w1,w2,w3" {
		t.Errorf("grant order %v, want w1,w2,w3", order)
	}
	if st := holder.Stats(); st.HandOvers != 1 {
		t.Errorf("holder's hand-overs = %d, want 1", st.HandOvers)
	}
}

// lockcore.Wait(0) is a single try: it neither waits nor registers (the seed's
// `blocking_timeout or default` turned 0 into the default).
func TestWaitZeroIsASingleTry(t *testing.T) {
	l := newLocker(t, Options{Wait: time.Hour})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	got, err := l.TryAcquire(ctx, "k")
	if got != nil || !errors.Is(err, ErrLocked) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("TryAcquire on a held key = %v, %v; want nil and ErrLocked", got, err)
	}
	if st := l.Stats(); st.Waited != 0 || st.Timeouts != 1 {
		t.Errorf("stats %+v: want no wait and one timeout", st)
	}
	if ws := waiters(t, l, "k"); len(ws) != 0 {
		t.Errorf("waiters after a single try: %+v", ws)
	}
}

// The wait ends with ErrTimeout (never a nil lock with a nil error),
// and leaves no registration behind.
func TestWaitTimesOut(t *testing.T) {
	l := newLocker(t, Options{Owner: "me"})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	got, err := l.Acquire(ctx, "k", lockcore.Wait(100*time.Millisecond))
	if got != nil || !errors.Is(err, ErrTimeout) {
		t.Fatalf("= %v, %v; want ErrTimeout", got, err)
	}
	if !strings.Contains(err.Error(), "held by me") {
		t.Errorf("error %q does not name the holder", err)
	}
	if ws := waiters(t, l, "k"); len(ws) != 0 {
		t.Errorf("waiters left after the timeout: %+v", ws)
	}
}

// Cancelling the context of a waiting Acquire ends the wait at once with
// an error wrapping the context's error, and takes
// the waiter out of the queue: the release that follows does not hand the
// key to it.
func TestCancelWhileWaiting(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := l.Acquire(wctx, "k", lockcore.Wait(time.Hour))
		done <- err
	}()
	waitForWaiters(t, l, "k", 1)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled wait: %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled Acquire did not return")
	}
	if ws := waiters(t, l, "k"); len(ws) != 0 {
		t.Errorf("waiters left after the cancellation: %+v", ws)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if held, err := l.IsLocked(ctx, "k"); err != nil || held {
		t.Errorf("after the release the key is held = %v, %v; the cancelled waiter got it", held, err)
	}
}

// A context deadline that ends the wait is a timeout too.
func TestContextDeadlineWhileWaiting(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(dctx, "k", lockcore.Wait(time.Hour)); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("= %v; want ErrTimeout and DeadlineExceeded", err)
	}
}
