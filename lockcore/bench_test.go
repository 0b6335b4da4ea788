package lockcore_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/benchcpu"
	"github.com/locktop/locktop/internal/testenv/interleave"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

func noop(context.Context) error { return nil }

// BenchmarkWithUncontended is one acquire + release per op on a random
// AGENT key, from one goroutine: the Go side of ../shared/bench/lock-cycle.sql.
func BenchmarkWithUncontended(b *testing.B) {
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s := lockcore.New(pool)
	ctx := context.Background()
	if err := s.With(ctx, lockcore.Pair(registry.SpaceAgent, 1), noop); err != nil { // warm: prepare statements
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.PerOp(b)()
	for b.Loop() {
		if err := s.With(ctx, lockcore.Pair(registry.SpaceAgent, rand.Int32N(1_000_000)+1), noop); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareCycle is the pinned reference of the lock cycle: the two
// statements of ../shared/bench/lock-cycle.sql sent by a bare pgx loop on
// one connection, as pgx sends them by default (extended protocol, prepared
// once), with no library around them. Nothing built on pgx can beat it, so
// comparing it across runs says whether the machine, not the code, changed.
func BenchmarkBareCycle(b *testing.B) {
	bare := bareCycle(b, pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 1 }))
	bare() // warm: prepare statements
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.PerOp(b)()
	for b.Loop() {
		bare()
	}
}

// bareCycle is ../shared/bench/lock-cycle.sql's two statements on a random
// key, on a connection of pool's held for the benchmark.
func bareCycle(b *testing.B, pool *pgxpool.Pool) func() {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Release)
	return func() {
		id := rand.Int32N(1_000_000) + 1
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(1, $1)", id); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(1, $1)", id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCycleInterleaved runs the cycles of BenchmarkWithUncontended and
// BenchmarkBareCycle in turn in one loop (interleave.Pair), each on a
// connection of its own, so that the machine's load weighs on both alike:
// lib/bare is what lockcore adds over the bare pgx loop.
func BenchmarkCycleInterleaved(b *testing.B) {
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s := lockcore.New(pool)
	ctx := context.Background()
	lib := func() {
		if err := s.With(ctx, lockcore.Pair(registry.SpaceAgent, rand.Int32N(1_000_000)+1), noop); err != nil {
			b.Fatal(err)
		}
	}
	bare := bareCycle(b, pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 1 }))
	lib() // warm: prepare statements
	bare()
	interleave.Pair(b, lib, bare)
}

// BenchmarkWithUncontendedNoFencing is BenchmarkWithUncontended with
// fencing off (the bare pg_advisory_lock): what minting the fence costs.
func BenchmarkWithUncontendedNoFencing(b *testing.B) {
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s := lockcore.New(pool, lockcore.NoFencing())
	ctx := context.Background()
	if err := s.With(ctx, lockcore.Pair(registry.SpaceAgent, 1), noop); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := s.With(ctx, lockcore.Pair(registry.SpaceAgent, rand.Int32N(1_000_000)+1), noop); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWithContended8 is 8 goroutines taking AGENT 42 (pg_advisory_lock(1,
// 42)) in turn, every grant through the server: ns per acquire + release,
// the Go side of ../shared/bench/contended.sql with 8 clients.
func BenchmarkWithContended8(b *testing.B) { benchContended(b) }

// BenchmarkBareContended8 is the pinned reference of the contended
// hand-over: ../shared/bench/contended.sql's two statements sent by 8
// goroutines, each with a pool connection of its own, as pgx sends them by
// default, with no library around them. On two cores the client's CPU per
// hand-over decides the rate, and this is what pgx and the Go runtime spend
// of it; what lockcore adds is BenchmarkWithContended8 over this.
func BenchmarkBareContended8(b *testing.B) {
	const workers = 8
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = workers; c.MinConns = workers })
	ctx := context.Background()
	conns := make([]*pgxpool.Conn, workers)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Release()
		conns[i] = c
	}
	cycle := func(c *pgxpool.Conn) error {
		if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(1, $1)", int32(42)); err != nil {
			return err
		}
		_, err := c.Exec(ctx, "SELECT pg_advisory_unlock(1, $1)", int32(42))
		return err
	}
	for _, c := range conns { // warm: prepare statements
		if err := cycle(c); err != nil {
			b.Fatal(err)
		}
	}
	shareN(b, workers, func(i int) error { return cycle(conns[i]) })
}

// BenchmarkWithContended8NoFencing is BenchmarkWithContended8 with fencing
// off.
func BenchmarkWithContended8NoFencing(b *testing.B) { benchContended(b, lockcore.NoFencing()) }

// BenchmarkWithContended8HandOff is BenchmarkWithContended8 with the
// in-process hand-off on (default bounds): the 8 goroutines are one
// Service's, so most grants pass the holder's session on.
func BenchmarkWithContended8HandOff(b *testing.B) { benchContended(b, lockcore.HandOff(0, 0)) }

func benchContended(b *testing.B, opts ...lockcore.Option) {
	const workers = 8
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = workers; c.MinConns = workers })
	s := lockcore.New(pool, opts...)
	ctx := context.Background()
	key := lockcore.Pair(registry.SpaceAgent, 42)
	var warm sync.WaitGroup
	for range workers { // open and prepare all connections before timing
		warm.Go(func() {
			if err := s.With(ctx, key, noop); err != nil {
				b.Error(err)
			}
		})
	}
	warm.Wait()
	shareN(b, workers, func(int) error { return s.With(ctx, key, noop) })
}

// shareN times b.N calls of op shared by workers goroutines (op gets the
// goroutine's index), each taking the next call as it finishes its last,
// with the process's CPU and context switches per call.
func shareN(b *testing.B, workers int, op func(worker int) error) {
	b.ReportAllocs()
	b.ResetTimer()
	defer benchcpu.PerOp(b)()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
