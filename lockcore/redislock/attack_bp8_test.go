package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// Attack tests (bp8): the error an Acquire returns when its wait ends, on
// main (a context.WithTimeout per wait) and with the Locker's waits alarm
// (alarm.Waits): the same sentinels, as README's Errors and Acquire's doc
// list them.

// TestAttackWaitEndsErrors: the key held for the whole wait is ErrTimeout
// (and lockcore.ErrTimeout), no context error and not ErrUnavailable; the
// caller's deadline first is ErrTimeout wrapping DeadlineExceeded; the
// caller's cancel, even with the cause DeadlineExceeded, is no timeout;
// and no wait is left in the Locker's alarm.
func TestAttackWaitEndsErrors(t *testing.T) {
	t.Parallel()
	a := newLocker(t, Options{Owner: "a"})
	b := lockerOn(t, a.rdb, Options{Owner: "b", Prefix: a.prefix})
	held, err := a.Acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())

	_, err = b.Acquire(context.Background(), "k", lockcore.Wait(300*time.Millisecond))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, lockcore.ErrTimeout) ||
		errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("the wait ran out: %v, want ErrTimeout alone", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = b.Acquire(ctx, "k", lockcore.Wait(time.Minute))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
		t.Errorf("the caller's deadline first: %v, want ErrTimeout and DeadlineExceeded", err)
	}

	cctx, ccancel := context.WithCancelCause(context.Background())
	time.AfterFunc(300*time.Millisecond, func() { ccancel(context.DeadlineExceeded) })
	_, err = b.Acquire(cctx, "k", lockcore.Wait(time.Minute))
	if errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the caller's cancel with the cause DeadlineExceeded: %v, want the cause alone", err)
	}
	if n := b.waits.Len(); n != 0 {
		t.Errorf("%d waits left in the Locker's alarm after the acquires returned", n)
	}
}

// TestAttackWaitEndsOnSilentRedis: a Redis that answers nothing (CLIENT
// PAUSE) within the wait is ErrUnavailable, not ErrTimeout: go-redis cuts
// the command at the wait context's Deadline.
func TestAttackWaitEndsOnSilentRedis(t *testing.T) {
	t.Parallel()
	s := redistest.Private(t)
	admin, rdb := redistest.ClientOf(t, s), redistest.ClientOf(t, s)
	l := lockerOn(t, rdb, Options{Owner: "l", Prefix: "p:"})
	if _, err := l.Acquire(context.Background(), "warm"); err != nil { // a pooled connection, the script loaded
		t.Fatal(err)
	}
	if err := admin.Do(context.Background(), "CLIENT", "PAUSE", "10000", "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := l.Acquire(context.Background(), "k", lockcore.Wait(300*time.Millisecond))
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTimeout) {
		t.Errorf("a silent Redis: %v, want ErrUnavailable", err)
	}
	// Not a timing assertion: the pause outlasts a command left uncut.
	if took > 9*time.Second {
		t.Errorf("Acquire returned after %v: the 300ms wait did not cut the command (the pause is 10s)", took)
	}
}

// TestAttackWaitAcrossClose: an Acquire waiting as its Locker closes
// still ends at its wait (ErrTimeout): Close stops the listener, not the
// waits' alarm; a wait asked after Close arms it as before.
func TestAttackWaitAcrossClose(t *testing.T) {
	t.Parallel()
	a := newLocker(t, Options{Owner: "a"})
	b := lockerOn(t, a.rdb, Options{Owner: "b", Prefix: a.prefix})
	held, err := a.Acquire(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Acquire(context.Background(), "k", lockcore.Wait(time.Second))
		done <- err
	}()
	pgtest.Eventually(t, "the acquire to wait", func() bool { return b.waits.Len() == 1 })
	b.Close()
	for i, ch := range []chan error{done, func() chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := b.Acquire(context.Background(), "k", lockcore.Wait(300*time.Millisecond))
			ch <- err
		}()
		return ch
	}()} {
		select {
		case err := <-ch:
			if !errors.Is(err, ErrTimeout) {
				t.Errorf("wait %d (across Close, after Close): %v, want ErrTimeout", i, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("wait %d still under way 60s into its wait", i)
		}
	}
	if n := b.waits.Len(); n != 0 {
		t.Errorf("%d waits left", n)
	}
}
