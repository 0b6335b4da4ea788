//go:build attack

package lockcore_test

import (
	"context"
	"testing"

	"github.com/locktop/locktop/lockcore"
)

// TestAttackFenceOfOnAFreshPool: Service.FenceOf answers "whether ctx
// holds key there" (in s's database), "the fence to write with to that
// database". A Service on a second pool to the same database that has
// served no acquire yet does not know its database: ctx holding the key
// through the first pool must still be answered with the hold's fence (and
// HolderPID with its pid), not "not held" until the pool happens to serve
// an acquire.
func TestAttackFenceOfOnAFreshPool(t *testing.T) {
	t.Parallel()
	dsn := freshDatabase(t)
	a := lockcore.New(newPool(t, dsn, nil))
	key := freshAgent()
	l, err := a.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	fresh := lockcore.New(newPool(t, dsn, nil))
	if f, ok := fresh.FenceOf(l.Context(), key); !ok || f != l.Fence() {
		t.Errorf("FenceOf through a fresh pool on the same database = %d, %v; want the hold's %d", f, ok, l.Fence())
	}
	if pid, ok := fresh.HolderPID(l.Context(), key); !ok || pid != l.PID() {
		t.Errorf("HolderPID through a fresh pool on the same database = %d, %v; want the hold's %d", pid, ok, l.PID())
	}
	// Another database's fresh pool: not held there.
	other := lockcore.New(newPool(t, freshDatabase(t), nil))
	if f, ok := other.FenceOf(l.Context(), key); ok {
		t.Errorf("FenceOf through a fresh pool on another database = %d, true; want not held", f)
	}
}
