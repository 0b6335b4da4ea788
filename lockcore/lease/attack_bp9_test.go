package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAttackStaggeredStallsOneManager: the package doc's promise that a
// stalled holder learns of the loss by its local deadline, with several
// unrenewed locks on one Manager (one expiry timer) whose deadlines differ:
// the earliest is released before its deadline (the timer was armed for
// it), one is upgraded (its deadline moves later as the timer is armed for
// the old one). Every lock still held ends by its own deadline, none
// before; the released one reports ErrReleased, not ErrLost.
func TestAttackStaggeredStallsOneManager(t *testing.T) {
	t.Parallel()
	e := postgresEnv(t)
	m := e.open(Options{Owner: "stall", Lease: time.Second, Heartbeat: -1})
	deadline := func(l *Lock) time.Time {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.deadline
	}
	a := acquire(t, ctxT(t), m, Map("bp9-a"), Write)
	b := acquire(t, ctxT(t), m, Map("bp9-b"), Write)
	c := acquire(t, ctxT(t), m, Map("bp9-c"), Upgradeable)
	release(t, a)
	before := deadline(c)
	if err := c.Upgrade(ctxT(t)); err != nil {
		t.Fatalf("Upgrade c: %v", err)
	}
	if !deadline(c).After(before) {
		t.Logf("c's deadline not moved by Upgrade (%v -> %v)", before, deadline(c))
	}
	d := acquire(t, ctxT(t), m, Map("bp9-d"), Write)
	for _, l := range []*Lock{b, c, d} {
		select {
		case <-l.Done():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: Done still open 20s after its 1s lease", l.Resource())
		}
		if early := time.Until(deadline(l)); early > 0 {
			t.Errorf("%s: lost %v before its local deadline", l.Resource(), early)
		}
		if !errors.Is(l.Err(), ErrLost) || !errors.Is(context.Cause(l.Context()), ErrLost) {
			t.Errorf("%s: Err %v, cause %v, want ErrLost", l.Resource(), l.Err(), context.Cause(l.Context()))
		}
	}
	if err := a.Err(); !errors.Is(err, ErrReleased) {
		t.Errorf("released a: Err %v, want ErrReleased", err)
	}
	for _, l := range []*Lock{b, c, d} {
		if err := l.Release(ctxT(t)); err != nil && !errors.Is(err, ErrLost) {
			t.Errorf("%s: Release after loss: %v", l.Resource(), err)
		}
	}
}
