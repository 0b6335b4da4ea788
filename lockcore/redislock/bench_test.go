package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bsm "github.com/bsm/redislock"

	"github.com/locktop/locktop/internal/testenv/benchcpu"
	"github.com/locktop/locktop/internal/testenv/interleave"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// BenchmarkAcquireRelease: one uncontended acquire and release, two round
// trips. make bench compares it with redis-benchmark sending the same two
// commands.
func BenchmarkAcquireRelease(b *testing.B) {
	l := newLocker(b, Options{})
	ctx := context.Background()
	defer benchcpu.PerOp(b)()
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

// BenchmarkAcquireReleaseBare sends the two scripts of one uncontended
// acquire and release (EVALSHA, with the same keys and arguments) through
// the same go-redis client, with none of the Locker's work (the held set
// and order check, the wait's context, the Lock and its bookkeeping,
// metrics): the pinned reference that separates what the library adds
// from what go-redis and the Go runtime cost beside redis-benchmark.
func BenchmarkAcquireReleaseBare(b *testing.B) {
	bare := bareCycle(b, newLocker(b, Options{}))
	defer benchcpu.PerOp(b)()
	for b.Loop() {
		bare()
	}
}

// bareCycle is one acquire and release of "bench" as the Locker's two
// scripts, sent bare through l's client.
func bareCycle(b *testing.B, l *Locker) func() {
	ctx := context.Background()
	ks := keysFor(l.prefix, "bench")
	return func() {
		tok := rand.Text()
		v, err := acquireScript.Run(ctx, l.rdb, ks.all(), tok, ms(l.ttl), l.owner, l.channel, "w", ms(waiterTTL)).Slice()
		if err != nil || len(v) < 1 || v[0] != int64(1) {
			b.Fatal(v, err)
		}
		if err := releaseScript.Run(ctx, l.rdb, ks.all(), tok).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquireReleaseInterleaved runs the cycle of
// BenchmarkAcquireRelease and that of BenchmarkAcquireReleaseBare in turn
// in one loop (interleave.Pair), so that the machine's load weighs on both
// alike: lib/bare is what the library adds over the bare loop.
func BenchmarkAcquireReleaseInterleaved(b *testing.B) {
	l := newLocker(b, Options{})
	ctx := context.Background()
	lib := func() {
		k, err := l.Acquire(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := k.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	bare := bareCycle(b, l)
	lib() // the connection and the scripts are ready before the loop
	bare()
	interleave.Pair(b, lib, bare)
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

// handOver measures hand-over among 8 goroutines on one key. Before a
// holder releases, the goroutine that held the key before it must be
// waiting again (acquire calls waiting once it is: registered, or after a
// failed try), so every grant is a hand-over to a goroutine that was
// already waiting, never a release and re-acquire by one goroutine, nor a
// goroutine barging in ahead of the waiters. Each goroutine starts to wait
// after a random pause below jitter, as requests arrive at random: pollers
// that all started together would stay in step and poll just before each
// release. ns/handover is the mean time from the start of a release to the
// next holder's acquire returning: the hand-over latency. requests/op is
// the requests Redis served per grant (what waiting costs the server).
// acquire returns the release.
func handOver(b *testing.B, jitter time.Duration, acquire func(ctx context.Context, waiting func()) (func() error, error)) {
	const workers = 8
	before := commandsProcessed(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		grants   int
		released time.Time                 // when the last release started
		waiting  = map[int]chan struct{}{} // grant n -> closed when holder n-1 waits again
		gaps     time.Duration
		handed   int
		wg       sync.WaitGroup
	)
	stop := func() {
		cancel()
		mu.Lock()
		cond.Broadcast()
		mu.Unlock()
	}
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			var announce chan struct{} // nil on the first entry
			for {
				time.Sleep(mrand.N(jitter)) // not synchronisation: a random arrival
				var once sync.Once
				release, err := acquire(ctx, func() {
					if announce != nil {
						once.Do(func() { close(announce) })
					}
				})
				if err != nil {
					if ctx.Err() == nil {
						b.Error(err)
						stop()
					}
					return
				}
				now := time.Now()
				mu.Lock()
				if !released.IsZero() {
					gaps += now.Sub(released)
					handed++
				}
				grants++
				n := grants
				cond.Broadcast()
				for n > 1 && waiting[n] == nil && ctx.Err() == nil {
					cond.Wait()
				}
				prev := waiting[n]
				delete(waiting, n)
				mu.Unlock()
				if prev != nil {
					select {
					case <-prev:
					case <-ctx.Done():
					}
				}
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := release(); err != nil {
					b.Error(err)
				}
				if n >= b.N {
					stop()
					return
				}
				// Compete again once another goroutine has the key, and say
				// when this one is waiting, so that one may release.
				mu.Lock()
				for grants == n && ctx.Err() == nil {
					cond.Wait()
				}
				announce = make(chan struct{})
				waiting[n+1] = announce
				cond.Broadcast()
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if handed > 0 {
		b.ReportMetric(float64(gaps.Nanoseconds())/float64(handed), "ns/handover")
	}
	b.ReportMetric(float64(commandsProcessed(b)-before)/float64(b.N), "requests/op")
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
		// Waiting once queued in Redis (its first try found the key held),
		// as bsm's waiter is once its first try failed: either way the
		// release measured does not race the previous holder's own try.
		afterRegister.set(func(ctx context.Context) {
			if waiting, ok := ctx.Value(waitingKey{}).(func()); ok {
				waiting()
			}
		})
		b.Cleanup(afterRegister.clear)
		handOver(b, 10*time.Millisecond, func(ctx context.Context, waiting func()) (func() error, error) {
			k, err := l.Acquire(context.WithValue(ctx, waitingKey{}, waiting), "bench", lockcore.Wait(time.Minute))
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
			handOver(b, 10*time.Millisecond, func(ctx context.Context, waiting func()) (func() error, error) {
				// Waiting once a try has failed and it backs off.
				opt := &bsm.Options{RetryStrategy: &told{RetryStrategy: bsm.LinearBackoff(backoff), waiting: waiting}}
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

// waitingKey carries handOver's waiting func to afterRegister.
type waitingKey struct{}

// told is a retry strategy that says when its Obtain first backs off.
type told struct {
	bsm.RetryStrategy
	waiting func()
}

func (t *told) NextBackoff() time.Duration {
	t.waiting()
	return t.RetryStrategy.NextBackoff()
}
