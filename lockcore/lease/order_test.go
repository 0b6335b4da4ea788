package lease

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// The global lock order and AcquireAll (the suite).

func testOrderRefused(t *testing.T, e *env) {
	m := e.open(Options{})
	mb := acquire(t, ctxT(t), m, Map("b"), Read)
	ctx := mb.Context()
	for _, r := range []Resource{Project("z"), Map("a"), Map("b")} {
		if l, err := m.Acquire(ctx, r, Read); !errors.Is(err, ErrLockOrder) {
			t.Errorf("Acquire %s after map:b: %v, want ErrLockOrder", r, err)
			if l != nil {
				release(t, l)
			}
		}
		if _, err := m.TryAcquire(ctx, r, Read); !errors.Is(err, ErrLockOrder) {
			t.Errorf("TryAcquire %s after map:b: %v, want ErrLockOrder", r, err)
		}
	}
	mc := acquire(t, ctx, m, Map("c"), Write)
	sk := acquire(t, mc.Context(), m, Sketch("a"), Write)
	if f, ok := FenceOf(sk.Context(), Map("b")); !ok || f != mb.Fence() {
		t.Errorf("FenceOf(map:b) = %d, %v", f, ok)
	}
	release(t, sk)
	release(t, mc)
	release(t, mb)
	// Released locks no longer count: the same context (its values; its
	// cancellation ended with the release) may go back.
	l := acquire(t, context.WithoutCancel(ctx), m, Project("z"), Read)
	release(t, l)
	// Unrelated contexts are not ordered against each other.
	l1 := acquire(t, ctxT(t), m, Sketch("s"), Read)
	l2 := acquire(t, ctxT(t), m, Project("p"), Read)
	release(t, l1)
	release(t, l2)
}

func testAcquireAll(t *testing.T, e *env) {
	m := e.open(Options{})
	locks, err := m.AcquireAll(ctxT(t),
		Request{Sketch("s2"), Write}, Request{Map("m1"), Read}, Request{Sketch("s1"), Write}, Request{Project("p"), Read})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range locks {
		got = append(got, l.Resource().String())
	}
	if want := []string{"project:p", "map:m1", "sketch:s1", "sketch:s2"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	last := locks[len(locks)-1].Context()
	for _, l := range locks {
		if _, ok := FenceOf(last, l.Resource()); !ok && l != locks[len(locks)-1] {
			t.Errorf("the last context does not carry %s", l.Resource())
		}
	}
	if _, err := m.Acquire(last, Map("m0"), Read); !errors.Is(err, ErrLockOrder) {
		t.Errorf("out of order after AcquireAll: %v", err)
	}
	for _, l := range slices.Backward(locks) {
		release(t, l)
	}
	// All or none: the last one is held elsewhere.
	other := e.open(Options{Owner: "other"})
	block := acquire(t, ctxT(t), other, Sketch("s9"), Write)
	short := e.open(Options{Wait: 500 * time.Millisecond})
	if _, err := short.AcquireAll(ctxT(t), Request{Project("p"), Write}, Request{Sketch("s9"), Write}); !errors.Is(err, ErrTimeout) {
		t.Errorf("AcquireAll with one held: %v, want ErrTimeout", err)
	}
	if hs := holding(t, m, Project("p")); len(hs) != 0 {
		t.Errorf("AcquireAll left %+v held", hs)
	}
	release(t, block)
	if _, err := m.AcquireAll(ctxT(t), Request{Map("x"), Read}, Request{Map("x"), Write}); !errors.Is(err, ErrLockOrder) {
		t.Errorf("the same resource twice: %v", err)
	}
}
