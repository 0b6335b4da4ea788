package redislock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// BenchmarkInspect is the one-pane figure's Redis pair in miniature: Inspect
// of 1,000 held locks (every field read) beside a bare SCAN loop over the
// same prefix. Compare the two in one run (-count 5): the issue 26 budget is
// Inspect ≤ 2× the bare loop.
func BenchmarkInspect(b *testing.B) {
	ctx := context.Background()
	l := newLocker(b, Options{TTL: 10 * time.Minute})
	for i := range 1000 {
		if _, err := l.TryAcquire(ctx, "bench:"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	rdb := redistest.Client(b)
	b.Run("inspect", func(b *testing.B) {
		for b.Loop() {
			if t, err := Inspect(ctx, rdb, l.prefix, 0); err != nil || len(t.Locks) != 1000 {
				b.Fatalf("%d locks, %v", len(t.Locks), err)
			}
		}
	})
	b.Run("bare-scan", func(b *testing.B) {
		for b.Loop() {
			var cursor uint64
			for {
				_, next, err := rdb.Scan(ctx, cursor, globEscape(l.prefix)+"*", scanCount).Result()
				if err != nil {
					b.Fatal(err)
				}
				if next == 0 {
					break
				}
				cursor = next
			}
		}
	})
}
