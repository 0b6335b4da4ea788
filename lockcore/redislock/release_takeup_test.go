package redislock

import (
	"context"
	"errors"
	"testing"
)

// A hold granted by a hand-over notice and released before its background
// take-up reached Redis is released, not lost: the take-up that finds the
// token gone while the release is under way leaves the lock to the
// release. Seen in make test as TestMetrics's lost failure counted once.
func TestReleaseBeforeTakeUpIsNotLoss(t *testing.T) {
	ctx := context.Background()
	h := handOverSetup(t)
	released := make(chan struct{})
	t.Cleanup(beforeTakeUp.clear)
	t.Cleanup(afterReleaseScript.clear)
	beforeTakeUp.set(func() { <-released })
	if err := h.k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-h.got
	if w == nil {
		t.FailNow()
	}
	if w.takeup == nil {
		t.Fatal("the waiter was granted by a poll, not by the notice: nothing to take up")
	}
	afterReleaseScript.set(func() {
		afterReleaseScript.clear()
		close(released)
		<-w.takeup // the take-up finds the token gone while the release is under way
	})
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Err(); !errors.Is(err, ErrReleased) || errors.Is(err, ErrLost) {
		t.Errorf("Err() = %v, want released, not lost", err)
	}
	if n := h.waiter.count.lost.Load(); n != 0 {
		t.Errorf("%d losses counted, want none", n)
	}
}
