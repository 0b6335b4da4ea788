package pgsource

import (
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// decoded is what read returns at 10,000 held advisory locks of one
// session and 20 waiters queued on the first 20 keys (the dashboard
// benchmark's load), without a server: the Go work after the query.
func decoded(taken time.Time) model.Snapshot {
	const held, waiters = 10000, 20
	s := model.Snapshot{Taken: taken}
	holder := &model.Backend{User: "postgres", State: "idle", Query: "SELECT count(pg_advisory_lock(1, g)) FROM generate_series(1, $1) g"}
	for i := range held {
		s.Locks = append(s.Locks, model.Lock{Kind: model.KindAdvisory, PID: 100, Database: "locktop_test_4242_123456", Backend: holder,
			Mode: model.ModeExclusive, Granted: true, Namespace: "AGENT", EntityID: int64(i + 1), Pair: true})
		if i < waiters {
			s.Locks = append(s.Locks, model.Lock{Kind: model.KindAdvisory, PID: int32(200 + i), Database: "locktop_test_4242_123456",
				Backend: &model.Backend{User: "postgres", State: "active", Query: "SELECT pg_advisory_lock(1, $1)"}, Mode: model.ModeExclusive,
				Namespace: "AGENT", EntityID: int64(i + 1), Pair: true, WaitStart: taken.Add(-time.Second)})
		}
	}
	queue(s.Locks)
	return s
}

// BenchmarkTrack is a Monitor's bookkeeping after each poll at 10,000
// held locks (held times, new waits): the part of a poll that is neither
// the query nor its decoding.
func BenchmarkTrack(b *testing.B) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	m := &Monitor{seenWaits: map[grantID][]int32{}}
	first := decoded(t0)
	m.track(&first)
	next := decoded(t0.Add(time.Second))
	b.ReportAllocs()
	for b.Loop() {
		snap := next
		snap.Locks = slices.Clone(next.Locks)
		m.track(&snap)
	}
}
