//go:build attack

package lease

import (
	"context"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// TestAttackHolderKilledWhileQueued: the README's crash promise with the
// next holder already queued (its wait timed by the Manager's waits alarm)
// when the holder's process is SIGKILLed: that same Acquire gets the lock
// once the dead holder's lease and Grace have passed, with a higher fence,
// well before its own wait deadline.
func TestAttackHolderKilledWhileQueued(t *testing.T) {
	for name, newEnv := range map[string]func(*testing.T) *env{"postgres": postgresEnv, "sqlite": sqliteEnv} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			r := Map("bp9-killed-queued")
			w := e.where
			w.Task, w.Owner, w.Resource, w.Lease = "hold", "doomed", r.String(), time.Second
			cmd := startHelper(t, w)
			m := e.open(Options{Owner: "next", Grace: 100 * time.Millisecond, Wait: 30 * time.Second})
			var dead int64
			type result struct {
				l   *Lock
				err error
			}
			done := make(chan result, 1)
			go func() {
				l, err := m.Acquire(context.Background(), r, Write)
				done <- result{l, err}
			}()
			pgtest.Eventually(t, "the next owner waits behind the helper", func() bool {
				locks, err := m.Locks(ctxT(t))
				if err != nil {
					return false
				}
				queued := false
				for _, i := range locks {
					if i.Resource == r && i.Owner == "doomed" && i.Granted {
						dead = i.Fence
					}
					if i.Resource == r && i.Owner == "next" && !i.Granted {
						queued = true
					}
				}
				return dead != 0 && queued
			})
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			killed := time.Now()
			var got result
			select {
			case got = <-done:
			case <-time.After(25 * time.Second):
				t.Fatal("the queued Acquire still waits 25s after its 1s-lease holder was killed")
			}
			if got.err != nil {
				t.Fatalf("the queued Acquire after the holder was killed: %v (after %v)", got.err, time.Since(killed))
			}
			defer got.l.Release(context.Background())
			if got.l.Fence() <= dead {
				t.Errorf("next holder's fence %d, not above the killed holder's %d", got.l.Fence(), dead)
			}
			t.Logf("queued waiter got the lock %v after the kill", time.Since(killed))
		})
	}
}
