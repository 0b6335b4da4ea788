package lockcore

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/registry"
)

// BenchmarkDurableFence measures what making fences durable costs the
// uncontended lock cycle (With on a random key), for a Service with a pool
// of its own (synchronous_commit on for the session) and a SharedPool one
// (set in each lock statement). Each op runs one cycle through each of
// four Services, each on a one-connection pool: the two as shipped, and
// each with its durable commit undone (the session setting put back to the
// server's, the clause cut from the statements). The order turns every
// op, so all see the same load. It reports the ratio of the medians,
// shipped over undone; on a shared machine those ratios are the numbers to
// read. The test server runs with fsync off: on one with fsync on, the
// flush that every 32nd grant waits for costs more.
func BenchmarkDurableFence(b *testing.B) {
	ctx := context.Background()
	pool := func() *pgxpool.Pool { return pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 1 }) }
	dedicated, dedicatedUndone := New(pool()), New(pool())
	shared, sharedUndone := New(pool(), SharedPool()), New(pool(), SharedPool())
	clause := " WHERE set_config('synchronous_commit', 'on', true) IS NOT NULL"
	for _, st := range []*statements{&sharedUndone.pair, &sharedUndone.single} {
		if !strings.Contains(st.lock, clause) {
			b.Fatalf("lock statement %q has no %q to cut", st.lock, clause)
		}
		st.lock = strings.Replace(st.lock, clause, "", 1)
		st.try = strings.Replace(st.try, clause, "", 1)
		st.lockWithin = strings.Replace(st.lockWithin, " AND set_config('synchronous_commit', 'on', true) IS NOT NULL", "", 1)
	}
	services := []*Service{dedicated, dedicatedUndone, shared, sharedUndone}
	noop := func(context.Context) error { return nil }
	cycle := func(s *Service) time.Duration {
		start := time.Now()
		if err := s.With(ctx, Pair(registry.SpaceAgent, rand.Int32N(1_000_000)+1), noop); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, s := range services { // warm: the sequence, the session, prepared statements
		cycle(s)
	}
	// The session setting, undone behind the Service's back.
	if _, err := dedicatedUndone.pool.Exec(ctx, "SET synchronous_commit TO DEFAULT"); err != nil {
		b.Fatal(err)
	}
	took := make([][]time.Duration, len(services))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range services {
			k := (i + j) % len(services)
			took[k] = append(took[k], cycle(services[k]))
		}
	}
	b.StopTimer()
	median := func(x []time.Duration) float64 { slices.Sort(x); return float64(x[len(x)/2]) }
	b.ReportMetric(median(took[0]), "dedicated-ns/cycle")
	b.ReportMetric(median(took[0])/median(took[1]), "dedicated-ratio")
	b.ReportMetric(median(took[2]), "shared-ns/cycle")
	b.ReportMetric(median(took[2])/median(took[3]), "shared-ratio")
}
