package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// TestExpirySharedTimer: the Manager's one expiry timer (expiry.go) ends
// every lock whose lease runs out unrenewed, at its deadline and not
// before, also a lock taken after the one the timer was armed for was
// released, and a lock taken after the timer last fired and found nothing.
func TestExpirySharedTimer(t *testing.T) {
	e := sqliteEnv(t)
	m := e.open(Options{Lease: 300 * time.Millisecond, Heartbeat: -1})
	lost := func(l *Lock) {
		t.Helper()
		select {
		case <-l.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Done still open 30s after its 300ms lease", l.Resource())
		}
		l.mu.Lock()
		deadline := l.deadline
		l.mu.Unlock()
		if early := time.Until(deadline); early > 0 {
			t.Errorf("%s: lost %v before its local deadline", l.Resource(), early)
		}
		if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLost) {
			t.Errorf("%s: cause %v, want ErrLost", l.Resource(), cause)
		}
	}
	// The timer is armed for a's deadline; a is released before it; b,
	// taken meanwhile, is due later.
	a := acquire(t, ctxT(t), m, Map("a"), Write)
	b := acquire(t, ctxT(t), m, Map("b"), Write)
	release(t, a)
	lost(b)
	if err := b.Release(ctxT(t)); !errors.Is(err, ErrLost) && err != nil {
		t.Errorf("b's Release: %v", err)
	}
	// The timer fired and found nothing left: c arms it again.
	c := acquire(t, ctxT(t), m, Map("c"), Write)
	lost(c)
}

// TestWaitAlarmSharedTimer: the Manager's waits (one alarm, expiry.go) end
// each Acquire's wait at its own deadline, and not before: a shorter wait
// asked after a longer one, and a wait asked after the alarm last fired
// and found nothing due.
func TestWaitAlarmSharedTimer(t *testing.T) {
	e := sqliteEnv(t)
	m := e.open(Options{})
	holder := acquire(t, ctxT(t), m, Map("held"), Write)
	defer release(t, holder)
	type result struct {
		err    error
		waited time.Duration
	}
	try := func(wait time.Duration) <-chan result {
		ch := make(chan result, 1)
		go func() {
			start := time.Now()
			l, err := m.Acquire(ctxT(t), Map("held"), Write, lockcore.Wait(wait))
			if err == nil {
				_ = l.Release(ctxT(t))
			}
			ch <- result{err, time.Since(start)}
		}()
		return ch
	}
	check := func(name string, ch <-chan result, wait time.Duration) {
		t.Helper()
		select {
		case r := <-ch:
			if !errors.Is(r.err, ErrTimeout) {
				t.Errorf("%s: %v, want ErrTimeout", name, r.err)
			}
			if r.waited < wait {
				t.Errorf("%s: gave up after %v, before its %v wait", name, r.waited, wait)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: still waiting 60s into its %v wait", name, wait)
		}
	}
	// The alarm is armed for the long wait first; the short one, asked
	// after it, moves it earlier.
	long := try(3 * time.Second)
	pgtest.Eventually(t, "the long wait to be under way", func() bool {
		return m.waits.Len() == 1
	})
	check("short wait asked after a long one", try(300*time.Millisecond), 300*time.Millisecond)
	check("long wait", long, 3*time.Second)
	// The alarm fired and found nothing left: a new wait arms it again.
	check("wait after the alarm found nothing", try(300*time.Millisecond), 300*time.Millisecond)
}
