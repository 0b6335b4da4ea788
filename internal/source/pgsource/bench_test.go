package pgsource_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/benchcpu"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
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
		defer benchcpu.PerOp(b)()
		for b.Loop() {
			if _, err := pgsource.Inspect(ctx, mon); err != nil {
				b.Fatal(err)
			}
		}
	})
	// poll is the source as the dashboard opens it (a Monitor, the one
	// pane's figure); own is the Monitor's statement sent from pgx with
	// its rows drained and nothing decoded: what poll adds to pgx.
	b.Run("poll", func(b *testing.B) {
		m, err := pgsource.Connect(ctx, pgtest.DSN(b), pgsource.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		b.ReportAllocs()
		defer benchcpu.PerOp(b)()
		for b.Loop() {
			if _, err := m.Poll(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		defer benchcpu.PerOp(b)()
		for b.Loop() {
			drain(ctx, b, mon)
		}
	})
	// poll-vs-own: each iteration a Monitor's poll, then its statement
	// drained from pgx on another connection, so a machine busy with other
	// work slows both alike; the medians and their ratio (what the
	// Monitor adds to pgx receiving its rows) are reported.
	b.Run("poll-vs-own", func(b *testing.B) {
		m, err := pgsource.Connect(ctx, pgtest.DSN(b), pgsource.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		var polls, owns []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := m.Poll(ctx); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			drain(ctx, b, mon)
			polls, owns = append(polls, t1.Sub(t0)), append(owns, time.Since(t1))
		}
		slices.Sort(polls)
		slices.Sort(owns)
		mp, mo := polls[len(polls)/2], owns[len(owns)/2]
		b.ReportMetric(float64(mp.Microseconds())/1000, "poll-ms")
		b.ReportMetric(float64(mo.Microseconds())/1000, "own-ms")
		b.ReportMetric(float64(mp)/float64(mo), "x-own")
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

// bareAllLocks is the physical limit of a poll that shows every kind: every
// row of pg_locks with its session, nothing decoded.
const bareAllLocks = `SELECT l.*, a.application_name, a.state, a.query, a.query_start FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid`

// BenchmarkPollManyDatabases is issue 30's server: 20 DDL pile-ups (a row
// holder, a row waiter, an ALTER TABLE queued behind them), in 20 tables of
// the monitor's own database (databases=1) or one in each of 20 other
// databases (databases=20), whose relations the monitor names in their own
// databases. cold: a fresh Monitor's first poll (every name a miss: the
// poll does not wait for them) and the time until a poll names them all
// (Named, then a poll); steady: a poll with every name cached, beside the
// bare read of every pg_locks row with its session, alternating.
func BenchmarkPollManyDatabases(b *testing.B) {
	const n = 20
	ctx := context.Background()
	pile := func(b *testing.B, dsn, table string) {
		conn := func() *pgx.Conn {
			c, err := pgx.Connect(ctx, dsn)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close(context.Background()) })
			return c
		}
		h := conn()
		if _, err := h.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY); INSERT INTO "+table+" VALUES (1)"); err != nil {
			b.Fatal(err)
		}
		tx, err := h.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		if _, err := tx.Exec(ctx, "SELECT * FROM "+table+" WHERE id = 1 FOR UPDATE"); err != nil {
			b.Fatal(err)
		}
		for _, sql := range []string{"SELECT * FROM " + table + " WHERE id = 1 FOR UPDATE", "ALTER TABLE " + table + " ADD COLUMN x int"} {
			c := conn()
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _, _ = c.Exec(wctx, sql) }()
			b.Cleanup(func() { cancel(); <-done })
		}
	}
	run := func(b *testing.B, named func(model.Snapshot) bool) {
		dsn := pgtest.DSN(b)
		warm, err := pgsource.Connect(ctx, dsn, pgsource.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer warm.Close()
		deadline := time.Now().Add(60 * time.Second)
		for {
			snap, err := warm.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if named(snap) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the pile-ups did not all show, named")
			}
		}
		b.Run("cold", func(b *testing.B) {
			var first, all []time.Duration
			for b.Loop() {
				b.StopTimer()
				m, err := pgsource.Connect(ctx, dsn, pgsource.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				t0 := time.Now()
				if _, err := m.Poll(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := m.Named(ctx); err != nil {
					b.Fatal(err)
				}
				snap, err := m.Poll(ctx)
				if err != nil {
					b.Fatal(err)
				}
				first, all = append(first, t1.Sub(t0)), append(all, time.Since(t0))
				b.StopTimer()
				if !named(snap) {
					b.Fatal("a poll after Named left a relation unnamed")
				}
				m.Close()
				b.StartTimer()
			}
			b.ReportMetric(ms(medianOf(first)), "first-poll-ms")
			b.ReportMetric(ms(medianOf(all)), "until-named-ms")
		})
		b.Run("steady", func(b *testing.B) {
			conn, err := warm.Pool().Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Release()
			bare := func() {
				rows, err := conn.Query(ctx, bareAllLocks)
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
				}
				rows.Close()
			}
			var poll, base, read []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := warm.Poll(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				bare()
				t2 := time.Now()
				// The poll's one statement and its decoding alone: what the
				// server and the wire cost, without naming and arranging.
				if _, err := pglocks.Read(ctx, conn); err != nil {
					b.Fatal(err)
				}
				poll, base, read = append(poll, t1.Sub(t0)), append(base, t2.Sub(t1)), append(read, time.Since(t2))
			}
			b.ReportMetric(ms(medianOf(poll)), "poll-ms")
			b.ReportMetric(ms(medianOf(read)), "statement-ms")
			b.ReportMetric(ms(medianOf(base)), "bare-ms")
			b.ReportMetric(float64(medianOf(poll))/float64(medianOf(base)), "x-bare")
		})
	}
	// counted reports whether a snapshot shows the n pile-ups with every
	// relation named.
	counted := func(snap model.Snapshot) bool {
		waits, unnamed := 0, 0
		for _, l := range snap.Locks {
			if l.Kind == model.KindRow || l.Kind == model.KindRelation {
				if !l.Granted {
					waits++
				}
				if l.Relation == "" {
					unnamed++
				}
			}
		}
		return waits >= 2*n && unnamed == 0
	}
	b.Run("databases=1", func(b *testing.B) {
		// Registered first, so it runs last: after the holders and waiters end.
		b.Cleanup(func() {
			c, err := pgx.Connect(context.Background(), pgtest.DSN(b))
			if err == nil {
				for i := range n {
					_, _ = c.Exec(context.Background(), fmt.Sprintf("DROP TABLE IF EXISTS bench_many_%d", i))
				}
				c.Close(context.Background())
			}
		})
		for i := range n {
			pile(b, pgtest.DSN(b), fmt.Sprintf("bench_many_%d", i))
		}
		run(b, counted)
	})
	b.Run(fmt.Sprintf("databases=%d", n), func(b *testing.B) {
		for i := range n {
			pile(b, pgtest.Database(b, fmt.Sprintf("lt_bench_%d_%d", i, os.Getpid())), "bench_orders")
		}
		run(b, counted)
	})
}

func medianOf(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// drain sends the Monitor's statement on conn and receives its rows,
// decoding nothing: pgx's share of a poll.
func drain(ctx context.Context, b *testing.B, conn *pgx.Conn) {
	rows, err := conn.Query(ctx, pglocks.SQL)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
	}
	if rows.Close(); rows.Err() != nil {
		b.Fatal(rows.Err())
	}
}
