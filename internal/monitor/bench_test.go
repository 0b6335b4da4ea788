package monitor_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/locktop/locktop/internal/monitor"
	"github.com/locktop/locktop/internal/pgtest"
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
			snap, err := monitor.Inspect(ctx, mon)
			if err != nil {
				b.Fatal(err)
			}
			if held, _ := snap.Counts(); held < n {
				b.Fatalf("Inspect saw %d held locks, want at least %d", held, n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := monitor.Inspect(ctx, mon); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
