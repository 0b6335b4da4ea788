package leasesource_test

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/lease"
)

// BenchmarkPoll is the one-pane figure's lease pair in miniature: a poll
// of 1,000 leases beside its bare read, the same five statements in one
// pipelined batch with the rows discarded (the pgbench baseline's script,
// testdata/bench/lease-list.sql), over one pgx connection. Compare them in
// one run (-count 5): the issue 26 budget is the poll ≤ 1.3× its bare read.
// Each also reports this process's CPU time a poll (cpu-ns/op): what the
// client spends, which a machine shared with other work does not blur
// as it does the wall-clock time.
func BenchmarkPoll(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.Pool(b, nil)
	m, err := lease.OpenPostgres(ctx, pool, lease.Options{})
	if err != nil {
		b.Fatal(err)
	}
	_ = m.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO `+lease.DefaultSchema+`.dal_locks
		(token, lock_id, fence, mode, owner, lease_expires, heartbeat_ts, granted_at, grace_ms)
		SELECT 'bench-' || g, 'map:bench-' || g, 1, 'write', 'bench', now() + interval '1 hour', now(), now(), 0
		FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING`); err != nil {
		b.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	src := leasesource.Postgres("lease", conn, "", false)
	b.Run("source", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if s, err := src.Poll(ctx); err != nil || len(s.Locks) < 1000 {
				b.Fatal(len(s.Locks), err)
			}
		}
	})
	script, err := os.ReadFile("../../../testdata/bench/lease-list.sql")
	if err != nil {
		b.Fatal(err)
	}
	bare := &pgx.Batch{}
	for _, line := range strings.Split(string(script), "\n") {
		switch {
		case strings.Contains(line, ":audit"):
			bare.Queue(strings.ReplaceAll(line, ":audit", "$1"), 100)
		case strings.HasPrefix(line, "SELECT"):
			bare.Queue(line)
		}
	}
	b.Run("bare", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := conn.SendBatch(ctx, bare).Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cpuPerOp starts counting the process's CPU time (user and system, every
// thread: the garbage collector's too); the function it returns reports
// it per op as cpu-ns/op.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime() time.Duration {
	var r syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
