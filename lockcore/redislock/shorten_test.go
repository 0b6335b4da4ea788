package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// The package doc promises "Extend sets the time left", and README that a
// hold's Context is cancelled with cause ErrLost "when its TTL passes
// without an extension". An Extend that shortens the TTL must therefore
// bring the client's loss estimate forward too: once Redis has let the key
// go and another Locker holds it, the first hold must already know it is
// lost, not keep believing in the original, longer TTL.
func TestExtendShorterMovesLossForward(t *testing.T) {
	l := newLocker(t, Options{})
	other := lockerOn(t, l.rdb, Options{Prefix: l.prefix})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k", lockcore.TTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	done := k.Done() // starts the lease timer, at the 10s TTL
	if err := k.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if left, err := k.TTL(ctx); err != nil || left > 300*time.Millisecond {
		t.Fatalf("TTL after Extend(300ms) = %v, %v; want at most 300ms", left, err)
	}
	k2, err := other.Acquire(ctx, "k", lockcore.Wait(3*time.Second), lockcore.TTL(10*time.Second))
	if err != nil {
		t.Fatalf("second locker after the shortened TTL ran out: %v", err)
	}
	defer k2.Release(ctx)
	// The lease timer is due by now; its goroutine may not have run yet on
	// a loaded box, so allow it a moment (far less than the 10s TTL).
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatalf("another Locker holds the key (fence %d) but the first hold's Done is still open: its loss estimate kept the 10s TTL", k2.Fence())
	}
	if c := context.Cause(k.Context()); !errors.Is(c, ErrLost) {
		t.Errorf("cause = %v, want ErrLost", c)
	}
	if err := k.Release(ctx); !errors.Is(err, ErrLost) && !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release of the lost hold = %v, want ErrLost", err)
	}
}

// Extend's doc: "A lock already ended (released, or seen lost) is not
// extended." The client's estimate errs early, so a hold seen lost by its
// lease timer may still exist in Redis for a moment; an Extend then must
// fail and leave the key to expire, not revive a hold its holder's context
// has already given up (the body has stopped; nobody would release it).
func TestExtendAfterSeenLostDoesNotRevive(t *testing.T) {
	l := newLocker(t, Options{})
	other := lockerOn(t, l.rdb, Options{Prefix: l.prefix})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k", lockcore.TTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	within(t, "the lease timer", k.Done(), 2*time.Second)
	if err := k.Extend(ctx, 10*time.Second); !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrLost) {
		t.Fatalf("Extend of a hold seen lost = %v, want ErrNotHeld and ErrLost", err)
	}
	k2, err := other.Acquire(ctx, "k", lockcore.Wait(10*time.Second), lockcore.TTL(10*time.Second))
	if err != nil {
		t.Fatalf("the key was not freed after the lost hold's TTL: %v", err)
	}
	defer k2.Release(ctx)
	if k2.Fence() <= k.Fence() {
		t.Errorf("fence %d after the lost hold's %d", k2.Fence(), k.Fence())
	}
}
