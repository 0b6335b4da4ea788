package lockcore_test

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// discard drops the warnings of the losses the benchmarks cause.
var discard = slog.New(slog.DiscardHandler)

// lossHold is how long a lock is held before its backend dies: a body at
// work, past the moment its connection's watch starts.
const lossHold = 5 * time.Millisecond

// BenchmarkLossTerminate measures, per op, the delay from
// pg_terminate_backend on a held lock's backend (called from another
// session) to the holder's Done closing, and reports its p50, p99 and max
// over all ops (run it with -benchtime Nx for N kills).
func BenchmarkLossTerminate(b *testing.B) {
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 2 })
	s := lockcore.New(pool, lockcore.Logger(discard))
	mon := pgtest.Conn(b)
	ctx := context.Background()
	key := lockcore.Pair(77, 1)
	var delays []time.Duration
	for b.Loop() {
		l, err := s.Acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(lossHold)
		start := time.Now()
		if _, err := mon.Exec(ctx, "SELECT pg_terminate_backend($1)", int32(l.PID())); err != nil {
			b.Fatal(err)
		}
		select {
		case <-l.Done():
			delays = append(delays, time.Since(start))
		case <-time.After(guard):
			b.Fatal("the loss went unseen")
		}
		_ = l.Release(ctx)
	}
	reportDelays(b, delays)
}

// BenchmarkLossRestart measures, per op, the delay from a server restart
// (a fast shutdown, as pg_ctl restart -m fast does) to each of 20 held
// locks' Done closing, on a cluster of its own, and reports p50, p99 and max
// over every lock of every op (-benchtime Nx for N restarts).
func BenchmarkLossRestart(b *testing.B) {
	const held = 20
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	cfg, err := pgxpool.ParseConfig(c.DSN("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = held + 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	s := lockcore.New(pool, lockcore.Logger(discard))
	var delays []time.Duration
	for b.Loop() {
		locks := make([]*lockcore.Lock, held)
		for i := range locks {
			if locks[i], err = s.Acquire(ctx, lockcore.Pair(78, int32(i))); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(lossHold)
		seen := make(chan time.Time, held)
		for _, l := range locks {
			go func() {
				select {
				case <-l.Done():
					seen <- time.Now()
				case <-time.After(guard):
					seen <- time.Time{}
				}
			}()
		}
		start := time.Now()
		if err := c.Restart(ctx); err != nil {
			b.Fatal(err)
		}
		for range held {
			t := <-seen
			if t.IsZero() {
				b.Fatal("a loss went unseen")
			}
			delays = append(delays, t.Sub(start))
		}
		for _, l := range locks {
			_ = l.Release(ctx)
		}
	}
	reportDelays(b, delays)
}

// reportDelays reports the p50, p99 and largest delay in milliseconds, and
// how many there were.
func reportDelays(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	rank := func(p float64) time.Duration { // nearest rank
		return d[max(int(math.Ceil(p*float64(len(d))))-1, 0)]
	}
	ms := func(x time.Duration) float64 { return float64(x) / float64(time.Millisecond) }
	b.ReportMetric(ms(rank(0.50)), "p50-ms")
	b.ReportMetric(ms(rank(0.99)), "p99-ms")
	b.ReportMetric(ms(d[len(d)-1]), "max-ms")
	b.ReportMetric(float64(len(d)), "losses")
}
