package lockcore_test

import (
	"context"
	"testing"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// FenceSequence draws the fences from the sequence it names, created on
// the first acquire: the grant's fence is that sequence's last value.
func TestFenceSequence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newService(t, 2, lockcore.FenceSequence("locktop_fence_test", "grants"))
	l, err := s.Acquire(ctx, freshAgent())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	var last int64
	if err := pgtest.Conn(t).QueryRow(ctx, "SELECT last_value FROM locktop_fence_test.grants").Scan(&last); err != nil {
		t.Fatal(err)
	}
	if l.Fence() == 0 || l.Fence() != last {
		t.Errorf("fence %d, the sequence's last value %d: the fence is not drawn from it", l.Fence(), last)
	}
}
