//go:build attack

package redislock

import (
	"context"
	"testing"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestAttackOverlappingPrefixesFences: two Lockers whose Prefix+key name
// the same hold ("p:" with "q:k", "p:q:" with "k") share the lock (the
// second's try is refused while the first holds) but not the fence counter
// (named after the prefix). Fences of the hold must still increase: they
// rest on the server's clock, so the second counter's grant comes out
// above the first's.
func TestAttackOverlappingPrefixesFences(t *testing.T) {
	srv := redistest.Private(t)
	ctx := context.Background()
	a := lockerOn(t, redistest.ClientOf(t, srv), Options{Prefix: "p:", Owner: "a"})
	b := lockerOn(t, redistest.ClientOf(t, srv), Options{Prefix: "p:q:", Owner: "b"})
	var last int64
	for range 3 {
		l, err := a.Acquire(ctx, "q:k")
		if err != nil {
			t.Fatal(err)
		}
		last = l.Fence()
		_ = l.Release(ctx)
	}
	l, err := a.Acquire(ctx, "q:k")
	if err != nil {
		t.Fatal(err)
	}
	if lb, err := b.TryAcquire(ctx, "k"); err == nil {
		t.Fatalf("b got k (fence %d) while a holds q:k, the same hold p:q:k", lb.Fence())
	}
	_ = l.Release(ctx)
	lb, err := b.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a's fences up to %d, then b's grant of the same hold: %d", l.Fence(), lb.Fence())
	if lb.Fence() <= l.Fence() {
		t.Errorf("fence went back on hold p:q:k: %d after %d (last %d)", lb.Fence(), l.Fence(), last)
	}
}
