package redislocks

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// BenchmarkInspect is the one-pane figure's Redis pair in miniature: Read
// of 1,000 held locks (every field read) beside a bare SCAN loop over the
// same prefix, and beside the bare read of every field (the SCAN loop with,
// per page, a pipeline of one HMGET per hold, decoded by go-redis and
// dropped). Compare them in one run (-count 5): the issue 26 budget is Read
// ≤ 2× the bare SCAN loop; DESIGN's is 1.3× the bare read.
func BenchmarkInspect(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Client(b)
	prefix := redistest.Prefix(b)
	l := redislock.New(rdb, redislock.Options{Prefix: prefix, TTL: 10 * time.Minute})
	defer l.Close()
	for i := range 1000 {
		if _, err := l.TryAcquire(ctx, "bench:"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("inspect", func(b *testing.B) {
		for b.Loop() {
			if t, err := Read(ctx, rdb, prefix, 0); err != nil || len(t.Locks) != 1000 {
				b.Fatalf("%d locks, %v", len(t.Locks), err)
			}
		}
	})
	b.Run("bare-read", func(b *testing.B) {
		for b.Loop() {
			var cursor uint64
			for {
				keys, next, err := rdb.Scan(ctx, cursor, globEscape(prefix)+"*", scanCount).Result()
				if err != nil {
					b.Fatal(err)
				}
				p := rdb.Pipeline()
				for _, k := range keys {
					p.HMGet(ctx, k, "p", "f", "o", "s", "e")
				}
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
				if next == 0 {
					break
				}
				cursor = next
			}
		}
	})
	b.Run("bare-scan", func(b *testing.B) {
		for b.Loop() {
			var cursor uint64
			for {
				_, next, err := rdb.Scan(ctx, cursor, globEscape(prefix)+"*", scanCount).Result()
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
