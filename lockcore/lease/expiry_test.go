package lease

import (
	"context"
	"errors"
	"testing"
	"time"
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
