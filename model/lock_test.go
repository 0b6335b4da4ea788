package model

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// Durations come from the snapshot's time, so the same lock read by two
// polls is the same value (a recording stores it once); Merge times each
// lock by its own source's clock.
func TestTimesAreAbsolute(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	hold := Lock{Kind: KindRedis, Name: "sesslock:t:a:c:web", Owner: "w1", Granted: true,
		HeldSince: t0.Add(-3 * time.Second), Expires: t0.Add(27 * time.Second)}
	wait := Lock{Kind: KindAdvisory, PID: 7, Namespace: "AGENT", EntityID: 1, Pair: true, WaitStart: t0.Add(-2 * time.Second)}
	s1 := Snapshot{Taken: t0, Locks: []Lock{hold}}
	s2 := Snapshot{Taken: t0.Add(time.Second), Locks: []Lock{hold}}
	if !reflect.DeepEqual(s1.Locks[0], s2.Locks[0]) {
		t.Fatal("an unchanged lock differs between snapshots")
	}
	if got := hold.Left(s2.Now(&s2.Locks[0])); got != 26*time.Second {
		t.Errorf("left %v at the second snapshot", got)
	}
	if got := hold.Held(t0); got != 3*time.Second {
		t.Errorf("held %v", got)
	}
	if wait.Waited(t0) != 2*time.Second || wait.Held(t0) != 0 || hold.Waited(t0) != 0 {
		t.Errorf("waited %v held %v", wait.Waited(t0), wait.Held(t0))
	}

	redisClock := t0.Add(500 * time.Millisecond)
	m := Merge([]Part{
		{Name: "postgres", Snapshot: Snapshot{Taken: t0, Connections: 9, Locks: []Lock{wait}}},
		{Name: "redis", Snapshot: Snapshot{Taken: redisClock, Locks: []Lock{hold}}},
		{Name: "lease", Err: errors.New("database is locked")},
	})
	if m.Taken != t0 || m.Connections != 9 || len(m.Locks) != 2 || len(m.Sources) != 3 {
		t.Fatalf("merged %+v", m)
	}
	if m.Locks[1].Source != 1 || m.Now(&m.Locks[1]) != redisClock || m.Now(&m.Locks[0]) != t0 {
		t.Errorf("sources %d, now %v / %v", m.Locks[1].Source, m.Now(&m.Locks[1]), m.Now(&m.Locks[0]))
	}
	if m.Sources[2].Err != "database is locked" || m.Sources[1].Locks != 1 || m.Sources[1].Taken != redisClock {
		t.Errorf("source status %+v", m.Sources)
	}
	if got := m.CountKinds(); !reflect.DeepEqual(got, []KindCount{{KindAdvisory, 0, 1}, {KindRedis, 1, 0}}) {
		t.Errorf("kinds %+v", got)
	}
}

func TestKeyLabels(t *testing.T) {
	for _, c := range []struct {
		l    Lock
		want string
	}{
		{Lock{Kind: KindAdvisory, Namespace: "AGENT", EntityID: 7, Pair: true}, "AGENT 7"},
		{Lock{Kind: KindRow, Relation: "public.turns", Row: "(0,3)"}, "public.turns row (0,3)"},
		{Lock{Kind: KindRelation, Relation: "public.turns"}, "public.turns"},
		{Lock{Kind: KindTransaction, Object: "725"}, "transaction 725"},
		{Lock{Kind: KindOther, LockType: "virtualxid", Object: "4/2"}, "virtualxid 4/2"},
		{Lock{Kind: KindRedis, Name: "sesslock:t1:a1:c1:web"}, "sesslock:t1:a1:c1:web"},
		{Lock{Kind: KindLease, Name: "map:m1"}, "map:m1"},
	} {
		if got := c.l.KeyLabel(); got != c.want {
			t.Errorf("%s: %q, want %q", c.l.Kind, got, c.want)
		}
	}
}

// SameKey must agree with comparing KeyIDs, field by field: each row below
// differs from the base in one field of the key (or in one that is not).
func TestSameKeyIsKeyID(t *testing.T) {
	base := Lock{Kind: KindAdvisory, Database: "app", Pair: true, Namespace: "ns", EntityID: 7, Relation: "public.t",
		RelationOID: 0, Row: "(0,1)", Object: "o", Name: "n", Server: "a", PID: 1, Granted: true}
	edits := []func(*Lock){
		func(*Lock) {},
		func(l *Lock) { l.Kind = KindRedis },
		func(l *Lock) { l.Database = "other" },
		func(l *Lock) { l.Pair = false },
		func(l *Lock) { l.Namespace = "x" },
		func(l *Lock) { l.EntityID = 8 },
		func(l *Lock) { l.Relation = "public.u" },
		func(l *Lock) { l.RelationOID = 42 },
		func(l *Lock) { l.Row = "(0,2)" },
		func(l *Lock) { l.Object = "p" },
		func(l *Lock) { l.Name = "m" },
		func(l *Lock) { l.Server = "b" },
		func(l *Lock) { l.PID, l.Granted, l.Owner = 2, false, "w" }, // not of the key
	}
	for i, a := range edits {
		for j, b := range edits {
			for _, oid := range []uint32{0, 42} { // with an oid the relation's name does not count
				x, y := base, base
				x.RelationOID, y.RelationOID = oid, oid
				a(&x)
				b(&y)
				if got, want := x.SameKey(&y), x.KeyID() == y.KeyID(); got != want {
					t.Errorf("edits %d and %d, oid %d: SameKey %v, KeyIDs equal %v", i, j, oid, got, want)
				}
			}
		}
	}
}
