package workers

import (
	"context"
	"testing"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
)

// A Redis try that finds the key taken is a skip, as an advisory or lease
// try that finds it taken is: not a timeout (it waited for nothing).
func TestRedisTryIsASkip(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.ClientOf(t, redistest.Private(t))
	a, b := redislock.New(rdb, redislock.Options{}), redislock.New(rdb, redislock.Options{})
	t.Cleanup(func() { a.Close(); b.Close() })
	l, err := a.Acquire(ctx, "conv")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	_, err = b.TryAcquire(ctx, "conv")
	if err == nil {
		t.Fatal("TryAcquire of a held key succeeded")
	}
	if got := classify(ctx, err); got != model.OutcomeSkipped {
		t.Fatalf("a Redis try that found the key taken counted as %v, want %v (err %v)", got, model.OutcomeSkipped, err)
	}
}
