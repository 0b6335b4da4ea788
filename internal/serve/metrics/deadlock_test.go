package metrics_test

import (
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/metrics"
	"github.com/locktop/locktop/model"
)

// A cycle through an advisory lock and a Redis lock counts once it is seen
// in two consecutive snapshots, and once only while it lasts.
func TestDeadlocksCounted(t *testing.T) {
	m := metrics.New()
	r := m.Registry()
	taken := time.Unix(1_800_000_000, 0)
	cycle := model.Snapshot{Taken: taken, Locks: []model.Lock{
		{Kind: model.KindAdvisory, PID: 10, Owner: "x", Namespace: "AGENT", EntityID: 7, Pair: true, Granted: true},
		{Kind: model.KindAdvisory, PID: 11, Owner: "y", Namespace: "AGENT", EntityID: 7, Pair: true, WaitStart: taken.Add(-time.Second), BlockedBy: []int32{10}},
		{Kind: model.KindRedis, Name: "K", Owner: "y", Granted: true, Source: 1},
		{Kind: model.KindRedis, Name: "K", Owner: "x", WaitStart: taken.Add(-time.Second), BlockedByOwners: []string{"y"}, Source: 1},
	}}
	m.Snapshot(cycle)
	if s := gather(t, r, "locktop_deadlocks_total"); len(s) != 0 {
		t.Fatalf("a cycle seen once counted: %v", s)
	}
	m.Snapshot(cycle)
	m.Snapshot(cycle)
	expect(t, r, 1, "locktop_deadlocks_total", "kinds", "advisory+redis")
	m.Snapshot(model.Snapshot{Taken: taken})
	m.Snapshot(cycle)
	m.Snapshot(cycle)
	expect(t, r, 2, "locktop_deadlocks_total", "kinds", "advisory+redis")
}
