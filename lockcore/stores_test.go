package lockcore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/locktop/locktop/lockcore"
)

// The same key in two databases is two locks, in either nesting: each
// Service's FenceOf answers its own grant, and each database still refuses
// its own held key as reentrant (one nesting, and HolderPID:
// TestReentrancyIsPerDatabase, TestFenceOfIsPerDatabase).
func TestSameKeyTwoDatabasesIsTwoLocks(t *testing.T) {
	t.Parallel()
	a := lockcore.New(newPool(t, freshDatabase(t), nil))
	b := lockcore.New(newPool(t, freshDatabase(t), nil))
	key := freshAgent()
	for _, p := range [][2]*lockcore.Service{{a, b}, {b, a}} {
		outer, inner := p[0], p[1]
		// A graph of its own: nesting both ways is an inversion, which is
		// TestOrderKnowsTheDatabase's.
		ctx := lockcore.WithOrder(context.Background(), lockcore.NewOrderGraph())
		o, err := outer.Acquire(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		err = inner.With(o.Context(), key, func(ctx context.Context) error {
			i, _ := inner.FenceOf(ctx, key)
			if f, ok := outer.FenceOf(ctx, key); !ok || f != o.Fence() {
				t.Errorf("the outer Service's FenceOf = %d, %v; want its own %d (the inner's is %d)", f, ok, o.Fence(), i)
			}
			for _, s := range p {
				if _, err := s.TryAcquire(ctx, key); !errors.Is(err, lockcore.ErrReentrant) {
					t.Errorf("the key again in a database that holds it: %v, want ErrReentrant", err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("the key in the second database while the first holds it: %v", err)
		}
		if err := o.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The order check knows a lock's database too: X then Y in one database
// and Y then X in another is no inversion (no wait can cycle through four
// different locks), while the same key nested across two databases one
// way and then the other is one (two processes doing that can deadlock).
func TestOrderKnowsTheDatabase(t *testing.T) {
	t.Parallel()
	a := lockcore.New(newPool(t, freshDatabase(t), nil))
	b := lockcore.New(newPool(t, freshDatabase(t), nil))
	g := lockcore.NewOrderGraph()
	g.SetStrict(true)
	ctx := lockcore.WithOrder(context.Background(), g)
	x, y := lockcore.Pair(7001, 1), lockcore.Pair(7002, 1) // two classes of no registry name
	nest := func(outer *lockcore.Service, k1 lockcore.Key, inner *lockcore.Service, k2 lockcore.Key) error {
		return outer.With(ctx, k1, func(ctx context.Context) error { return inner.With(ctx, k2, noop) })
	}
	if err := nest(a, x, a, y); err != nil {
		t.Fatal(err)
	}
	if err := nest(b, y, b, x); err != nil {
		t.Errorf("Y then X in the second database, after X then Y in the first: %v, want no inversion", err)
	}
	if err := nest(a, x, b, x); err != nil {
		t.Fatal(err)
	}
	if err := nest(b, x, a, x); !errors.Is(err, lockcore.ErrLockOrder) {
		t.Errorf("the key in the first database under the second's, after the reverse: %v, want ErrLockOrder", err)
	}
}
