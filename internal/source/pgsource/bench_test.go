package pgsource_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// BenchmarkInspect is one monitor poll (query + decode + arrange) with 100,
// 1,000 and 10,000 advisory locks held on the server: the Go side of
// ../shared/bench/pg_locks_poll.sql.
func BenchmarkInspect(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			holder := pgtest.Conn(b)
			ctx := context.Background()
			if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(77, g) FROM generate_series(1, $1) g", n); err != nil {
				b.Fatal(err)
			}
			defer holder.Exec(ctx, "SELECT pg_advisory_unlock_all()")
			mon := pgtest.Conn(b)
			snap, err := pgsource.Inspect(ctx, mon)
			if err != nil {
				b.Fatal(err)
			}
			if held, _ := snap.Counts(); held < n {
				b.Fatalf("Inspect saw %d held locks, want at least %d", held, n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := pgsource.Inspect(ctx, mon); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInspectMixed is one poll with 1,000 advisory locks held and 100
// SELECT … FOR UPDATE waiters (each on a row of its own, behind one
// holder), beside the bare pg_locks query (testdata/bench/pg_locks_poll.sql)
// on the same load: the PostgreSQL source of issue 13's refresh.
func BenchmarkInspectMixed(b *testing.B) {
	ctx := context.Background()
	holder := pgtest.Conn(b)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(78, g) FROM generate_series(1, 1000) g"); err != nil {
		b.Fatal(err)
	}
	defer holder.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	if _, err := holder.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_rows (id int PRIMARY KEY); INSERT INTO bench_rows SELECT g FROM generate_series(1, 100) g ON CONFLICT DO NOTHING"); err != nil {
		b.Fatal(err)
	}
	tx, err := holder.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT * FROM bench_rows FOR UPDATE"); err != nil {
		b.Fatal(err)
	}
	pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 100 })
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 1; i <= 100; i++ {
		wg.Go(func() { _, _ = pool.Exec(wctx, "SELECT * FROM bench_rows WHERE id = $1 FOR UPDATE", i) })
	}
	defer func() { cancel(); wg.Wait() }()
	mon := pgtest.Conn(b)
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := pgsource.Inspect(ctx, mon)
		if err != nil {
			b.Fatal(err)
		}
		if _, waiting := snap.Counts(); waiting >= 100 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the 100 row waiters did not queue")
		}
	}
	b.Run("inspect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pgsource.Inspect(ctx, mon); err != nil {
				b.Fatal(err)
			}
		}
	})
	bare, err := os.ReadFile("../../../testdata/bench/pg_locks_poll.sql")
	if err != nil {
		b.Fatal(err)
	}
	runBare := func(b *testing.B) {
		rows, err := mon.Query(ctx, string(bare))
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		rows.Close()
	}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			runBare(b)
		}
	})
	// Side by side: each iteration runs both, so a machine busy with other
	// work slows both alike; the medians and their ratio are reported.
	b.Run("ratio", func(b *testing.B) {
		var ins, bar []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := pgsource.Inspect(ctx, mon); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			runBare(b)
			ins, bar = append(ins, t1.Sub(t0)), append(bar, time.Since(t1))
		}
		slices.Sort(ins)
		slices.Sort(bar)
		mi, mb := ins[len(ins)/2], bar[len(bar)/2]
		b.ReportMetric(float64(mi.Microseconds())/1000, "inspect-ms")
		b.ReportMetric(float64(mb.Microseconds())/1000, "bare-ms")
		b.ReportMetric(float64(mi)/float64(mb), "x-bare")
	})
}
