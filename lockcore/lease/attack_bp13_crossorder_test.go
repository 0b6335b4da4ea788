//go:build attack

package lease

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// TestAttackTwoProcessesTwoStoresOpposite: seed 004 §8.1 orders every
// operation's locks globally (projects, maps, sketches, by id) "to prevent
// deadlocks", and the package refused, with ErrLockOrder, a resource that
// sorts at or before one the context holds. Two processes (two contexts
// with order graphs of their own, so neither sees the other's order), each
// on the same two stores, nest map:m1 and map:m2 the opposite ways round
// across the stores: on main the second nesting is refused at once; on
// hk's change each store's order was its own, and both waited for each
// other until their waits ran out (a deadlock no graph of either process
// can see). The order is global again, across stores (checkOrder).
func TestAttackTwoProcessesTwoStoresOpposite(t *testing.T) {
	dir := t.TempDir()
	open := func(file string) *Manager {
		m, err := OpenSQLite(ctxT(t), filepath.Join(dir, file), testOptions(Options{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	x, y := open("x.db"), open("y.db")
	var both sync.WaitGroup
	both.Add(2)
	errs := make([]error, 2)
	var done sync.WaitGroup
	for i, p := range []struct {
		outer *Manager
		r     Resource
		inner *Manager
		q     Resource
	}{{x, Map("m1"), y, Map("m2")}, {y, Map("m2"), x, Map("m1")}} {
		done.Go(func() {
			ctx := lockcore.WithOrder(ctxT(t), lockcore.NewOrderGraph()) // a process of its own
			lo, err := p.outer.Acquire(ctx, p.r, Write)
			both.Done()
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = lo.Release(context.Background()) }()
			both.Wait() // each holds its first before asking for its second
			li, err := p.inner.Acquire(lo.Context(), p.q, Write, lockcore.Wait(3*time.Second))
			if err == nil {
				_ = li.Release(context.Background())
			}
			errs[i] = err
		})
	}
	done.Wait()
	for i, err := range errs {
		if errors.Is(err, ErrTimeout) {
			t.Errorf("process %d: %v: the two processes deadlocked across the stores", i, err)
		}
	}
	if !errors.Is(errs[1], ErrLockOrder) {
		t.Errorf("map:m1 under map:m2 (another store's): %v, want ErrLockOrder (seed 004 §8.1's global order)", errs[1])
	}
}
