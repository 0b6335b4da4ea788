package waitfor

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// crossKind is process X (owner "x", backend 10) holding AGENT 7 and
// waiting for Redis key K, held by process Y (owner "y", backend 11),
// which waits for AGENT 7: a cycle through two systems. Beside it, a
// PostgreSQL-only cycle (20 and 21) and a plain queue (30 behind 31).
func crossKind() model.Snapshot {
	adv := func(pid int32, owner string, granted bool, by ...int32) model.Lock {
		l := model.Lock{Kind: model.KindAdvisory, PID: pid, Owner: owner, Namespace: "AGENT", EntityID: 7, Pair: true,
			Mode: model.ModeExclusive, Granted: granted, BlockedBy: by, Backend: &model.Backend{ApplicationName: model.AppWithOwner("sim", owner)}}
		if !granted {
			l.WaitStart = t0.Add(-2 * time.Second)
		}
		return l
	}
	return model.Snapshot{Taken: t0, Locks: []model.Lock{
		adv(10, "x", true), adv(11, "y", false, 10),
		holds(20, "(1,1)"), waits(21, "(1,1)", time.Second, 20), holds(21, "(1,2)"), waits(20, "(1,2)", time.Second, 21),
		holds(31, "(2,1)"), waits(30, "(2,1)", time.Second, 31),
		{Kind: model.KindRedis, Name: "K", Owner: "y", Mode: "exclusive", Granted: true, Source: 1},
		{Kind: model.KindRedis, Name: "K", Owner: "x", Mode: "exclusive", WaitStart: t0.Add(-time.Second), BlockedByOwners: []string{"y"}, Source: 1},
	}}
}

func TestCyclesAcrossKinds(t *testing.T) {
	s := crossKind()
	g := Build(&s)
	cs := g.Cycles()
	if len(cs) != 2 {
		t.Fatalf("%d cycles, want 2: %+v", len(cs), cs)
	}
	x := cs[0]
	if want := []Session{{Owner: "x"}, {Owner: "y"}}; !slices.Equal(x.Sessions, want) {
		t.Errorf("sessions %v, want %v", x.Sessions, want)
	}
	if x.KindsLabel() != "advisory+redis" || x.ServerResolves {
		t.Errorf("kinds %q, server resolves %v; want advisory+redis, false", x.KindsLabel(), x.ServerResolves)
	}
	if len(x.Edges) != 2 {
		t.Fatalf("edges %+v", x.Edges)
	}
	e := x.Edges[0] // x waits for y on K
	if e.From != (Session{Owner: "x"}) || e.To != (Session{Owner: "y"}) || e.Wait.Name != "K" || e.Held.Owner != "y" || !e.Held.Granted {
		t.Errorf("edge 0 %+v", e)
	}
	if e := x.Edges[1]; e.Wait.KeyLabel() != "AGENT 7" || e.Held.PID != 10 {
		t.Errorf("edge 1 waits on %q, held by pid %d; want AGENT 7 held by 10", e.Wait.KeyLabel(), e.Held.PID)
	}
	if got, want := x.Formed(), t0.Add(-time.Second); !got.Equal(want) {
		t.Errorf("formed %v, want %v", got, want)
	}
	pg := cs[1]
	if want := []Session{{PID: 20}, {PID: 21}}; !slices.Equal(pg.Sessions, want) || !pg.ServerResolves || pg.KindsLabel() != "row" {
		t.Errorf("PostgreSQL cycle %+v; want 20 and 21, row, resolved by the server", pg)
	}
}

// A pid-only backend and an owner are different nodes: a waiter on a
// backend without an owner does not close a cycle through an owner.
func TestNoCycleWithoutTheOwner(t *testing.T) {
	s := crossKind()
	for i := range s.Locks {
		if s.Locks[i].PID == 10 {
			s.Locks[i].Owner = "" // x's backend not stamped: 10 is not x
		}
	}
	g := Build(&s)
	for _, c := range g.Cycles() {
		if !c.ServerResolves {
			t.Errorf("a cycle across kinds without the owner join: %+v", c.Sessions)
		}
	}
}

func TestDetectorTwoPolls(t *testing.T) {
	cyc, calm := crossKind(), snapshot()
	calm.Locks = calm.Locks[:7] // the chain, no cycle
	var d Detector
	step := func(s model.Snapshot, active, fresh int) {
		t.Helper()
		a, f := d.Observe(Build(&s))
		if len(a) != active || len(f) != fresh {
			t.Fatalf("active %d fresh %d, want %d %d", len(a), len(f), active, fresh)
		}
	}
	step(cyc, 0, 0)  // seen once: maybe a phantom
	step(cyc, 2, 2)  // twice: two deadlocks
	step(cyc, 2, 0)  // still there: not new
	step(calm, 0, 0) // gone
	step(cyc, 0, 0)  // back: seen once again
	step(calm, 0, 0) // a phantom that never repeats is never reported
	step(cyc, 0, 0)
	step(cyc, 2, 2)
	if len(d.Active()) != 2 {
		t.Errorf("Active %d", len(d.Active()))
	}
}

// A long chain of waits is walked without recursion.
func TestLongChain(t *testing.T) {
	var s model.Snapshot
	const n = 20000
	for i := int32(1); i <= n; i++ {
		s.Locks = append(s.Locks, holds(i, "k"+strconv.Itoa(int(i))), waits(i+1, "k"+strconv.Itoa(int(i)), time.Second, i))
	}
	s.Locks = append(s.Locks, waits(1, "last", time.Second, n+1)) // closes the ring
	cs := Build(&s).Cycles()
	if len(cs) != 1 || len(cs[0].Sessions) != n+1 {
		t.Fatalf("%d cycles", len(cs))
	}
}

// Two pods, each running many tasks under one owner id, each holding a key
// the other waits for: where a pod's hold was granted after its own wait
// began, another of its tasks holds it, and no deadlock is reported.
func TestNoCycleFromTwoTasksOfOneOwner(t *testing.T) {
	redis := func(name, owner string, held, waitStart time.Duration, by string) model.Lock {
		l := model.Lock{Kind: model.KindRedis, Name: name, Owner: owner, Mode: "exclusive", Source: 1}
		if by == "" {
			l.Granted, l.HeldSince = true, t0.Add(-held)
		} else {
			l.WaitStart, l.BlockedByOwners = t0.Add(-waitStart), []string{by}
		}
		return l
	}
	// pod-2 waits for A since 3s ago, and was granted B 1s ago (by another
	// of its tasks); pod-3 holds A and waits for B.
	s := model.Snapshot{Taken: t0, Locks: []model.Lock{
		redis("A", "pod-3", 5*time.Second, 0, ""), redis("A", "pod-2", 0, 3*time.Second, "pod-3"),
		redis("B", "pod-2", time.Second, 0, ""), redis("B", "pod-3", 0, 500*time.Millisecond, "pod-2"),
	}}
	if cs := Build(&s).Cycles(); len(cs) != 0 {
		t.Errorf("a cycle of two pods' unrelated tasks: %+v", cs[0].Sessions)
	}
	// Granted before the wait began: it may be one task; reported.
	s.Locks[2].HeldSince = t0.Add(-4 * time.Second)
	if cs := Build(&s).Cycles(); len(cs) != 1 {
		t.Errorf("%d cycles, want 1", len(cs))
	}
}
