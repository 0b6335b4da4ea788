package ui

import (
	"context"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// manyDatabases is issue 30's server: the monitor in app, a row queue and
// a DDL pile-up in db2 (named), a relation wait in db3 that could not be
// named (CONNECT revoked).
func manyDatabases() model.Snapshot {
	return model.Snapshot{Taken: t0, Connections: 12, Partial: []string{`database db3: relations not named: permission denied for database "db3"`}, Locks: []model.Lock{
		held(lock("AGENT", 7, 4242, "locktop.lock", true), 12*time.Second),
		{Kind: model.KindRow, PID: 30831, Database: "db2", LockType: "transactionid", Relation: "public.orders",
			RelationOID: 16390, Row: "(0,1)", Mode: "ExclusiveLock", Granted: true, Backend: &model.Backend{ApplicationName: "orders", State: "idle in transaction"}, HeldSince: t0.Add(-time.Minute)},
		{Kind: model.KindRow, PID: 30840, Database: "db2", Backend: &model.Backend{ApplicationName: "orders"}, LockType: "transactionid", Relation: "public.orders",
			RelationOID: 16390, Row: "(0,1)", Mode: "ShareLock", QueuePos: 1, WaitStart: t0.Add(-12 * time.Second), BlockedBy: []int32{30831}},
		{Kind: model.KindRelation, PID: 30831, Database: "db2", LockType: "relation", Relation: "public.orders", RelationOID: 16390,
			Mode: "RowShareLock", Granted: true, HeldSince: t0.Add(-time.Minute)},
		{Kind: model.KindRelation, PID: 30841, Database: "db2", Backend: &model.Backend{ApplicationName: "migrate"}, LockType: "relation", Relation: "public.orders",
			RelationOID: 16390, Mode: "AccessExclusiveLock", QueuePos: 1, WaitStart: t0.Add(-10 * time.Second), BlockedBy: []int32{30831}},
		{Kind: model.KindRelation, PID: 31000, Database: "db3", LockType: "relation", RelationOID: 16401,
			Mode: "ShareLock", Granted: true, HeldSince: t0.Add(-time.Minute)},
		{Kind: model.KindRelation, PID: 31001, Database: "db3", Backend: &model.Backend{ApplicationName: "migrate"}, LockType: "relation", RelationOID: 16401,
			Mode: "AccessExclusiveLock", QueuePos: 1, WaitStart: t0.Add(-4 * time.Second), BlockedBy: []int32{31000}},
	}}
}

// Every relation is named in its own database, a relation that could not
// be named reads "DB oid N" (its database said once), and the gauges count
// the locks of each database.
func TestGoldenManyDatabases(t *testing.T) {
	snap := manyDatabases()
	st := DefaultStyles()
	k := DefaultKeyMap()
	tb := newLockTable(&st, &k)
	tb.db = "app"
	tb.SetSize(100, 12)
	tb.SetSnapshot(&snap)
	golden(t, "databases_table_100x12", tb.View())

	g := gauges{st: &st, width: 100, maxConns: 100}
	g.SetSnapshot(&snap)
	g.held, g.waiting = 5, 3
	g.dbs = countDatabases(snap.Locks)
	g.dbRow = g.byDatabase()
	golden(t, "databases_gauges_100", g.View())
	if g.Height() != 3 {
		t.Errorf("gauges with a row per database: %d lines, want 3", g.Height())
	}
	k2 := DefaultKeyMap()
	p := newPoller(context.Background(), time.Second, []*feed{{name: "PostgreSQL", conn: connOK, latency: 3 * time.Millisecond, taken: t0, partial: snap.Partial}})
	opts := Options{}
	h := header{st: &st, keys: &k2, poll: &p, width: 100, info: info, mode: opts.mode()}
	golden(t, "databases_header_100", h.View())

	one := manyDatabases()
	one.Locks = one.Locks[:1]
	if g.dbs = countDatabases(one.Locks); g.byDatabase() {
		t.Error("one database counts per database")
	}
}

// database:NAME keeps the locks of that database, exactly; text alone
// matches the key, which names a database only when its relation is unnamed.
func TestFilterDatabase(t *testing.T) {
	snap := manyDatabases()
	for f, want := range map[string]int{"database:db2": 4, "db:DB3": 2, "database:db": 0, "database:app": 1, "db2": 0, "db3": 2} {
		fl := parseFilter(f)
		n := 0
		for i := range snap.Locks {
			if fl.match(&snap.Locks[i]) {
				n++
			}
		}
		if n != want {
			t.Errorf("filter %q matches %d rows, want %d", f, n, want)
		}
	}
}

// A relation not named keeps its identity: the same key before and after
// its name comes in.
func TestUnnamedRelationKeepsItsKey(t *testing.T) {
	l := manyDatabases().Locks[5]
	if got := ansi.Strip(l.KeyLabel()); got != "db3 oid 16401" {
		t.Errorf("label %q, want db3 oid 16401", got)
	}
	named := l
	named.Relation = "public.jobs"
	if l.KeyID() != named.KeyID() || named.KeyLabel() != "public.jobs" {
		t.Errorf("named: key %v vs %v, label %q", l.KeyID(), named.KeyID(), named.KeyLabel())
	}
}
