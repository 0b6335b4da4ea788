//go:build attack

package lockcore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/locktop/locktop/lockcore"
)

// takeOn is take on a store.
func takeOn(ctx context.Context, store, class, name string) (context.Context, error) {
	e, err := lockcore.Check(ctx, "test", store, name, class)
	if err != nil {
		return ctx, err
	}
	e.Hold = fakeHold{}
	return lockcore.Push(ctx, e), nil
}

// TestAttackDeclaredOrderClosesCrossStoreCycle: a cycle of three threads,
// one of whose steps is only the declared order (MAP before SKETCH on one
// store), through another store: sketch s on A then project p on B; project
// p on B then map m on A; and (declared) map m on A then sketch s on A. The
// second acquire closes the cycle, and a strict graph refuses it. Inverting
// the declared order on one store is refused; on two stores it is not.
func TestAttackDeclaredOrderClosesCrossStoreCycle(t *testing.T) {
	g := lockcore.NewOrderGraph()
	g.DeclareOrder("PROJECT", "MAP", "SKETCH")
	g.SetStrict(true)
	ctx := lockcore.WithOrder(context.Background(), g)
	s, err := takeOn(ctx, "A", "SKETCH", "sketch:s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := takeOn(s, "B", "PROJECT", "project:p"); err != nil {
		t.Fatalf("a project on B under a sketch on A: %v", err)
	}
	p, err := takeOn(ctx, "B", "PROJECT", "project:p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := takeOn(p, "A", "MAP", "map:m"); !errors.Is(err, lockcore.ErrLockOrder) {
		t.Errorf("a map on A under a project on B, after a project on B under a sketch on A: %v, want ErrLockOrder", err)
	}
	m, err := takeOn(ctx, "C", "MAP", "map:m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := takeOn(m, "C", "PROJECT", "project:q"); !errors.Is(err, lockcore.ErrLockOrder) {
		t.Errorf("a project under a map on one store: %v, want ErrLockOrder (declared)", err)
	}
	if _, err := takeOn(m, "D", "PROJECT", "project:q"); err != nil {
		t.Errorf("a project on D under a map on C: %v, want no inversion", err)
	}
}
