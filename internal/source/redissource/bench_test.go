package redissource_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// BenchmarkPoll is the one-pane Redis figure in miniature (cmd/benchreport's
// "one pane" step): the source's Poll of 1,000 held session mutexes beside
// its bare read (redislocks.BareRead: the same commands, decoded by go-redis
// and dropped) and beside a bare SCAN loop of the prefix. Compare them in
// one run (-count 5); profile poll with -cpuprofile.
func BenchmarkPoll(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Client(b)
	prefix := redistest.Prefix(b)
	l := redislock.New(rdb, redislock.Options{Prefix: prefix, TTL: 10 * time.Minute, Owner: "bench"})
	defer l.Close()
	for i := range 1000 {
		if _, err := l.TryAcquire(ctx, "bench:"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	src := redissource.New(redistest.Client(b), redissource.Options{Prefix: prefix})
	b.Run("poll", func(b *testing.B) {
		for b.Loop() {
			if snap, err := src.Poll(ctx); err != nil || len(snap.Locks) != 1000 {
				b.Fatalf("%d locks, %v", len(snap.Locks), err)
			}
		}
	})
	b.Run("bare-read", func(b *testing.B) {
		for b.Loop() {
			if n, err := redislocks.BareRead(ctx, rdb, prefix); err != nil || n != 1000 {
				b.Fatalf("%d holds, %v", n, err)
			}
		}
	})
	b.Run("bare-scan", func(b *testing.B) {
		for b.Loop() {
			var cursor uint64
			for {
				_, next, err := rdb.Scan(ctx, cursor, prefix+"*", 1000).Result()
				if err != nil {
					b.Fatal(err)
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
	})
}
