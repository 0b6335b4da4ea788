package metrics_test

import (
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/metrics"
	"github.com/locktop/locktop/model"
)

// BenchmarkSnapshot publishes a snapshot of 1,000 locks, half of them
// waiting, over 10 namespaces: the cost a poll adds for the metrics.
func BenchmarkSnapshot(b *testing.B) {
	m := metrics.New()
	t0 := time.Unix(1_800_000_000, 0)
	locks := make([]model.Lock, 1000)
	for i := range locks {
		locks[i] = model.Lock{Kind: model.KindAdvisory, Database: "app", Pair: true, Namespace: string(rune('0' + i%10)), EntityID: int64(i), Granted: i%2 == 0}
		if i%2 == 1 {
			locks[i].WaitStart = t0.Add(-time.Duration(i) * time.Millisecond)
		}
	}
	s := model.Snapshot{Taken: t0, Interval: time.Second, Locks: locks}
	b.ReportAllocs()
	for b.Loop() {
		m.Snapshot(s)
	}
}
