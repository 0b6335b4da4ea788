package pgsource

import (
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/benchcpu"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// BenchmarkBuild10k is a Monitor's poll after the query at 10,000 held
// advisory locks of one session and 20 waiters (the dashboard benchmark's
// load), without a server: the model rows, the keys' names, the queues and
// the held times (build and track).
func BenchmarkBuild10k(b *testing.B) {
	const held, waiters = 10000, 20
	taken := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	t := pglocks.Table{Taken: taken, Backends: map[int32]*pglocks.Backend{}}
	holder := &pglocks.Backend{User: "postgres", Application: "bench", State: "idle",
		Query: "SELECT count(pg_advisory_lock(1, g)) FROM generate_series(1, $1) g", StateChange: taken.Add(-time.Minute)}
	t.Backends[100] = holder
	for i := range held {
		k := lockcore.Pair(1, int32(i+1))
		t.Rows = append(t.Rows, pglocks.Row{Key: k, Database: "locktop", PID: 100, Granted: true, Backend: holder})
		if i < waiters {
			w := &pglocks.Backend{User: "postgres", State: "active", Query: "SELECT pg_advisory_lock(1, $1)", QueryStart: taken.Add(-time.Second)}
			t.Backends[int32(200+i)] = w
			t.Rows = append(t.Rows, pglocks.Row{Key: k, Database: "locktop", PID: int32(200 + i), WaitStart: taken.Add(-time.Second), Backend: w})
		}
	}
	reg := registry.Builtin()
	m := &Monitor{seenWaits: map[grantID][]int32{}}
	b.ReportAllocs()
	defer benchcpu.PerOp(b)()
	for b.Loop() {
		t.Taken = t.Taken.Add(time.Second)
		snap := build(&t, reg)
		m.track(&snap)
	}
}
