package redislock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bsm "github.com/bsm/redislock"

	"github.com/locktop/locktop/internal/redistest"
)

// BenchmarkAcquireRelease: one uncontended acquire and release, two round
// trips. make bench compares it with redis-benchmark sending the same two
// commands.
func BenchmarkAcquireRelease(b *testing.B) {
	l := newLocker(b, Options{})
	ctx := context.Background()
	for b.Loop() {
		k, err := l.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := k.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRoundTrip: one PING from go-redis, the physical limit of any
// command.
func BenchmarkRoundTrip(b *testing.B) {
	rdb := redistest.Client(b)
	ctx := context.Background()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// handOver measures hand-over: 8 goroutines on one key, each of which,
// after releasing, waits until another has the key before it competes
// again, so every grant but the first goes to a goroutine that was already
// waiting. ns/op is the time per grant: the release, and the hand-over to
// the next waiter; requests/op the requests Redis served per grant (what
// waiting costs the server). acquire returns the release.
func handOver(b *testing.B, acquire func(ctx context.Context) (func() error, error)) {
	const workers = 8
	before := commandsProcessed(b)
	defer func() { b.ReportMetric(float64(commandsProcessed(b)-before)/float64(b.N), "requests/op") }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		grants int
		wg     sync.WaitGroup
	)
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			for {
				release, err := acquire(ctx)
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
						cancel()
					}
					return
				}
				mu.Lock()
				grants++
				mine := grants
				cond.Broadcast()
				mu.Unlock()
				if err := release(); err != nil {
					b.Error(err)
				}
				if mine >= b.N {
					cancel()
					mu.Lock()
					cond.Broadcast()
					mu.Unlock()
					return
				}
				mu.Lock()
				for grants == mine && ctx.Err() == nil {
					cond.Wait()
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
}

// commandsProcessed counts the scripts Redis ran (EVALSHA and EVAL calls,
// from INFO commandstats): both libraries send nothing else while they
// acquire, wait and release, so it counts their requests.
func commandsProcessed(b *testing.B) int64 {
	info, err := redistest.Client(b).Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				calls, _, _ := strings.Cut(v, ",")
				c, _ := strconv.ParseInt(calls, 10, 64)
				n += c
			}
		}
	}
	return n
}

// BenchmarkHandOver8: the hand-over of this package (the release gives the
// key to the longest waiter and tells it through pub/sub), against
// bsm/redislock, whose waiters poll with LinearBackoff.
func BenchmarkHandOver8(b *testing.B) {
	b.Run("redislock", func(b *testing.B) {
		l := newLocker(b, Options{})
		handOver(b, func(ctx context.Context) (func() error, error) {
			k, err := l.Acquire(ctx, "bench", Wait(time.Minute))
			if err != nil {
				return nil, err
			}
			return func() error { return k.Release(context.Background()) }, nil
		})
	})
	for _, backoff := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond} {
		b.Run("bsm-linear-"+backoff.String(), func(b *testing.B) {
			rdb := redistest.Client(b)
			c := bsm.New(rdb)
			key := redistest.Prefix(b) + "bench"
			opt := &bsm.Options{RetryStrategy: bsm.LinearBackoff(backoff)}
			handOver(b, func(ctx context.Context) (func() error, error) {
				k, err := c.Obtain(ctx, key, time.Minute, opt)
				if err != nil {
					if errors.Is(err, context.Canceled) && ctx.Err() != nil {
						return nil, ctx.Err()
					}
					return nil, err
				}
				return func() error { return k.Release(context.Background()) }, nil
			})
		})
	}
}
