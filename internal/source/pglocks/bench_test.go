package pglocks_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// BenchmarkInspectStatement is the monitor's statement beside the bare
// pg_locks query (testdata/bench/pg_locks_poll.sql at the module root), with 10,000 advisory
// locks held: each iteration runs the bare query, SQL with its rows
// read and not decoded (what the server and the wire cost), and Read
// (the same with the decoding), one after the other on one connection, so
// a machine busy with other work slows all three alike. Reported: the
// medians and their ratios to the bare query.
func BenchmarkInspectStatement(b *testing.B) {
	ctx := context.Background()
	holder := pgtest.Conn(b)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(79, g) FROM generate_series(1, 10000) g"); err != nil {
		b.Fatal(err)
	}
	defer holder.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	bare, err := os.ReadFile("../../../testdata/bench/pg_locks_poll.sql")
	if err != nil {
		b.Fatal(err)
	}
	mon := pgtest.Conn(b)
	drain := func(sql string) {
		rows, err := mon.Query(ctx, sql)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		if rows.Close(); rows.Err() != nil {
			b.Fatal(rows.Err())
		}
	}
	drain(string(bare)) // warm: prepare both statements
	drain(pglocks.SQL)
	var tb, ts, tr []time.Duration
	for b.Loop() {
		t0 := time.Now()
		drain(string(bare))
		t1 := time.Now()
		drain(pglocks.SQL)
		t2 := time.Now()
		if _, err := pglocks.Read(ctx, mon); err != nil {
			b.Fatal(err)
		}
		tb, ts, tr = append(tb, t1.Sub(t0)), append(ts, t2.Sub(t1)), append(tr, time.Since(t2))
	}
	med := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2].Microseconds()) / 1000 }
	mb, ms, mr := med(tb), med(ts), med(tr)
	b.ReportMetric(mb, "bare-ms")
	b.ReportMetric(ms, "statement-ms")
	b.ReportMetric(mr, "readlocks-ms")
	b.ReportMetric(ms/mb, "statement-x-bare")
	b.ReportMetric(mr/mb, "readlocks-x-bare")
}
