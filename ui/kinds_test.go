package ui

import (
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// everyKind is one table of every kind, merged from three sources as the
// dashboard merges them: the server's advisory, row and relation locks, a
// Redis's session mutex (on a clock half a second ahead) and a lease with
// a stale holder and a waiter, and an audit record.
func everyKind() model.Snapshot {
	rt := t0.Add(500 * time.Millisecond)
	pg := model.Snapshot{Taken: t0, Connections: 9, Locks: []model.Lock{
		held(lock("AGENT", 7, 4242, "locktop.lock", true), 12*time.Second),
		waiting(lock("AGENT", 7, 4243, "hook.stop", false), 1, 2*time.Second, 4242),
		{Kind: model.KindRow, PID: 5100, Database: "app", Backend: &model.Backend{User: "app_rw", ApplicationName: "summariser", State: "idle in transaction", StateChange: t0.Add(-13 * time.Minute), Query: "SELECT * FROM turns WHERE id = 3 FOR UPDATE NOWAIT"}, LockType: "transactionid",
			Relation: "public.turns", Row: "(0,3)", Mode: "ExclusiveLock", Granted: true,
			HeldSince: t0.Add(-13 * time.Minute)},
		{Kind: model.KindRow, PID: 5101, Database: "app", Backend: &model.Backend{User: "app_rw", ApplicationName: "summariser", State: "active", Query: "SELECT * FROM turns WHERE id = 3 FOR UPDATE"}, LockType: "transactionid",
			Relation: "public.turns", Row: "(0,3)", Mode: "ShareLock", QueuePos: 1, WaitStart: t0.Add(-13 * time.Minute),
			BlockedBy: []int32{5100}},
		{Kind: model.KindRelation, PID: 5200, Database: "app", Backend: &model.Backend{ApplicationName: "psql", State: "active", Query: "SELECT count(*) FROM agents"}, LockType: "relation", Relation: "public.agents",
			Mode: "AccessShareLock", Granted: true},
		{Kind: model.KindRelation, PID: 5201, Database: "app", Backend: &model.Backend{ApplicationName: "migrate", State: "active", Query: "ALTER TABLE agents ADD COLUMN x int"}, LockType: "relation", Relation: "public.agents",
			Mode: "AccessExclusiveLock", QueuePos: 1, WaitStart: t0.Add(-3 * time.Second), BlockedBy: []int32{5200},
		},
	}}
	redis := model.Snapshot{Taken: rt, Locks: []model.Lock{
		{Kind: model.KindRedis, Name: "sesslock:t1:a1:c1:web", Namespace: "SESSION", Owner: "brain-1", Token: "a1b2c3", Fence: 42,
			Mode: "exclusive", Granted: true, HeldSince: rt.Add(-5 * time.Second), Expires: rt.Add(25 * time.Second)},
		{Kind: model.KindRedis, Name: "sesslock:t1:a1:c1:web", Namespace: "SESSION", Owner: "brain-2", Token: "d4e5f6",
			Mode: "exclusive", QueuePos: 1, WaitStart: rt.Add(-3 * time.Second), BlockedByOwners: []string{"brain-1"}},
	}}
	lease := model.Snapshot{Taken: t0, Locks: []model.Lock{
		{Kind: model.KindLease, Name: "map:m1", Namespace: "MAP", Owner: "job:tiles-9", Fence: 5, Mode: "write", Granted: true,
			HeldSince: t0.Add(-time.Minute), Expires: t0.Add(-2 * time.Second), Heartbeat: t0.Add(-40 * time.Second), Stale: true},
		{Kind: model.KindLease, Name: "map:m1", Namespace: "MAP", Owner: "job:export-10", Mode: "read", QueuePos: 1,
			WaitStart: t0.Add(-8 * time.Second), Expires: t0.Add(20 * time.Second), BlockedByOwners: []string{"job:tiles-9"}},
	}, Audit: []model.Audit{{Name: "map:m1", Actor: "job:tiles-9", Reason: "lease expired", VictimOwner: "job:calib-3",
		VictimMode: "write", VictimFence: 4, Fence: 5, At: t0.Add(-time.Minute)}}}
	return model.Merge([]model.Part{{Name: "PostgreSQL", Snapshot: pg}, {Name: "redis", Snapshot: redis}, {Name: "lease", Snapshot: lease}})
}

// Each kind's rows, and each kind's details, as golden screens.
func TestGoldenEveryKind(t *testing.T) {
	snap := everyKind()
	st := DefaultStyles()
	k := DefaultKeyMap()
	for _, w := range []int{80, 140} {
		tb := newLockTable(&st, &k)
		tb.db = "app"
		tb.SetSize(w, 16)
		tb.SetSnapshot(&snap)
		golden(t, "kinds_table_"+itoa(int64(w))+"x16", tb.View())
	}
	for i, name := range map[int]string{2: "row_holder", 3: "row_waiter", 5: "relation_waiter", 6: "redis_holder", 7: "redis_waiter", 8: "lease_holder", 9: "lease_waiter"} {
		beats := []time.Time{t0.Add(-70 * time.Second), t0.Add(-55 * time.Second), t0.Add(-40 * time.Second)}
		golden(t, "kinds_details_"+name, describeLock(&st, &snap, &snap.Locks[i], "app", beats, 100))
	}

	g := gauges{st: &st, maxConns: 100}
	g.SetSize(120, 0)
	g.SetSnapshot(&snap)
	g.kinds = snap.CountKinds()
	g.kindRow = g.byKind()
	v := ansi.Strip(g.View())
	golden(t, "kinds_gauges_120", v)
}

// The filter finds locks of every kind by kind and by key.
func TestFilterAcrossKinds(t *testing.T) {
	snap := everyKind()
	st := DefaultStyles()
	k := DefaultKeyMap()
	tb := newLockTable(&st, &k)
	tb.SetSize(140, 16)
	tb.SetSnapshot(&snap)
	for f, want := range map[string]int{"kind:lease": 1, "kind:redis": 1, "kind:row": 1, "turns": 1, "sesslock": 1, "map:m1": 1, "brain-2": 1, "kind:relation": 1} {
		tb.SetFilter(f)
		if tb.shown != want {
			t.Errorf("filter %q: %d groups, want %d", f, tb.shown, want)
		}
	}
}
