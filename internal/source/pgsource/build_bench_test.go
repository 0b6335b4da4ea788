package pgsource

import (
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/benchcpu"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// mixedTable is what pglocks.Read returns on the one pane's PostgreSQL load
// (1,000 advisory locks of one session, 100 SELECT … FOR UPDATE waiters
// each on a row of its own behind that session), without a server: the
// rows as the server names them, for the Go work after the query.
func mixedTable(taken time.Time) pglocks.Table {
	const held, waiters = 1000, 100
	t := pglocks.Table{Taken: taken, Backends: map[int32]*pglocks.Backend{}}
	holder := &pglocks.Backend{User: "postgres", Application: "bench", State: "idle in transaction",
		Query: "SELECT * FROM onepane_rows FOR UPDATE", StateChange: taken.Add(-time.Minute), XactStart: taken.Add(-time.Minute)}
	t.Backends[100] = holder
	for i := range held {
		t.Rows = append(t.Rows, pglocks.Row{Key: lockcore.Pair(79, int32(i+1)), Database: "locktop", PID: 100, Granted: true, Backend: holder})
	}
	t.Others = append(t.Others, pglocks.Other{LockType: "transactionid", Object: "900", PID: 100, Mode: "ExclusiveLock", Granted: true, Backend: holder})
	for i := range waiters {
		pid := int32(200 + i)
		b := &pglocks.Backend{User: "postgres", State: "active", Query: "SELECT * FROM onepane_rows WHERE id = $1 FOR UPDATE",
			QueryStart: taken.Add(-time.Second), XactStart: taken.Add(-time.Second)}
		t.Backends[pid] = b
		row := "(0," + strconv.Itoa(i+1) + ")"
		t.Others = append(t.Others,
			pglocks.Other{LockType: "tuple", Database: "locktop", Relation: "public.onepane_rows", DatabaseOID: 5, RelationOID: 16384,
				Tuple: row, PID: pid, Mode: "AccessExclusiveLock", Granted: true, Backend: b},
			pglocks.Other{LockType: "transactionid", Object: "900", PID: pid, Mode: "ShareLock",
				WaitStart: taken.Add(-time.Second), BlockedBy: []int32{100}, Backend: b})
	}
	return t
}

// BenchmarkBuildMixed is Inspect's work after the rows are read, on the one
// pane's load: the model rows, the keys' names, the queues, the other
// kinds' groups and the held bounds.
func BenchmarkBuildMixed(b *testing.B) {
	t := mixedTable(time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC))
	reg := registry.Builtin()
	if snap := build(&t, reg); len(snap.Locks) != 1200 {
		b.Fatalf("%d rows, want 1,200", len(snap.Locks))
	}
	b.ReportAllocs()
	defer benchcpu.PerOp(b)()
	for b.Loop() {
		snap := build(&t, reg)
		bound(snap.Locks, nil)
	}
}
