package lease

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The package doc: a holder whose lease runs out with no heartbeat renewing
// it learns of it (Lock.Context cancelled with a cause wrapping ErrLost) no
// later than the lease passes in the database; the next holder's fence is
// strictly greater; the stalled holder's Release returns ErrLost.
func TestStallPastLease(t *testing.T) {
	t.Parallel() // each case waits for a lease to run out
	for name, newEnv := range map[string]func(*testing.T) *env{"postgres": postgresEnv, "sqlite": sqliteEnv} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			a := e.open(Options{Owner: "A", Lease: time.Second, Heartbeat: -1})
			b := e.open(Options{Owner: "B", Grace: 100 * time.Millisecond})
			r := Map("stall-lease")
			start := time.Now()
			la := acquire(t, ctxT(t), a, r, Write)
			select {
			case <-la.Context().Done():
				// The timer fires no later than the lease passes (1s from a
				// grant made after start); 3s allows a slow -race run.
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("stalled holder learnt of the loss %v after its 1s lease began", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the stalled holder's context not cancelled 10s after its 1s lease")
			}
			if cause := context.Cause(la.Context()); !errors.Is(cause, ErrLost) {
				t.Errorf("stalled holder's cause %v, want ErrLost", cause)
			}
			lb := acquire(t, ctxT(t), b, r, Write)
			if lb.Fence() <= la.Fence() {
				t.Errorf("next holder's fence %d <= stalled holder's %d", lb.Fence(), la.Fence())
			}
			if err := la.Release(ctxT(t)); !errors.Is(err, ErrLost) {
				t.Errorf("stalled holder's Release after takeover: %v, want ErrLost", err)
			}
			if lb.Context().Err() != nil {
				t.Errorf("new holder's context cancelled by the stale Release: %v", context.Cause(lb.Context()))
			}
			release(t, lb)
		})
	}
}
