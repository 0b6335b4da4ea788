package redislock

import (
	"context"
	"errors"
	"testing"
)

// CI, 2026-11-26: the conformance suite's exclusion case failed with "lost
// while held" after a With whose body had returned. A listener's first
// subscription checks every watched hold; one that ran between a
// release's script (the key gone) and the release marking the lock
// released found the key gone and declared the hold lost.
func TestCheckDuringReleaseIsNotLoss(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "check-during-release")
	if err != nil {
		t.Fatal(err)
	}
	k.Context() // watched, as With's body makes it
	t.Cleanup(afterReleaseScript.clear)
	afterReleaseScript.set(func() { l.checkHolds(ctx, []*Lock{k}) })
	if err := k.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := k.Err(); errors.Is(got, ErrLost) || !errors.Is(got, ErrReleased) {
		t.Fatalf("after Release, Err() = %v; want ErrReleased, not lost", got)
	}
	if n := l.Stats().Lost; n != 0 {
		t.Fatalf("%d holds counted lost, want 0", n)
	}
}
