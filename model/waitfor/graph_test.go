package waitfor

import (
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

var t0 = time.Date(2026, 3, 14, 15, 4, 5, 0, time.UTC)

func holds(pid int32, key string) model.Lock {
	return model.Lock{Kind: model.KindRow, PID: pid, Relation: "public.t", Row: key, Granted: true}
}

func waits(pid int32, key string, d time.Duration, by ...int32) model.Lock {
	return model.Lock{Kind: model.KindRow, PID: pid, Relation: "public.t", Row: key, WaitStart: t0.Add(-d), BlockedBy: by}
}

// A chain across objects (A=3 holds row 6 and waits for row 5, held by
// B=1), a second root with one waiter, a Redis queue, and a cycle.
func snapshot() model.Snapshot {
	return model.Snapshot{Taken: t0, Locks: []model.Lock{
		holds(1, "(0,5)"), waits(3, "(0,5)", 50*time.Second, 1), waits(4, "(0,5)", 20*time.Second, 1),
		holds(3, "(0,6)"), waits(5, "(0,6)", 45*time.Second, 3),
		holds(9, "(0,9)"), waits(10, "(0,9)", 100*time.Second, 9),
		// 20 and 21 wait for each other.
		holds(20, "(1,1)"), waits(21, "(1,1)", time.Second, 20), holds(21, "(1,2)"), waits(20, "(1,2)", time.Second, 21),
		{Kind: model.KindRedis, Name: "k", Owner: "pod-a", Granted: true, Source: 1},
		{Kind: model.KindRedis, Name: "k", Owner: "pod-b", WaitStart: t0.Add(-3 * time.Second), BlockedByOwners: []string{"pod-a"}, Source: 1},
	}}
}

func TestRootsAndCosts(t *testing.T) {
	s := snapshot()
	g := Build(&s)
	roots := g.Roots()
	want := []Root{
		{Session{PID: 1}, Cost{Direct: 2, Behind: 3, Waited: 115 * time.Second}},
		{Session{PID: 9}, Cost{Direct: 1, Behind: 1, Waited: 100 * time.Second}},
		{Session{Owner: "pod-a"}, Cost{Direct: 1, Behind: 1, Waited: 3 * time.Second}},
	}
	if len(roots) != len(want) {
		t.Fatalf("roots %+v, want %+v", roots, want)
	}
	for i := range want {
		if roots[i] != want[i] {
			t.Errorf("root %d: %+v, want %+v", i, roots[i], want[i])
		}
	}
	if _, ok := g.Root(Session{PID: 3}); ok {
		t.Error("3 waits, yet is a root")
	}
	if r, d, ok := g.Rank(Session{PID: 5}); !ok || r != 0 || d != 2 {
		t.Errorf("rank of 5: %d, %d, %v; want 0, 2, true", r, d, ok)
	}
	if _, _, ok := g.Rank(Session{PID: 20}); ok {
		t.Error("a session in a cycle has a root")
	}
	st := g.Stranded()
	if len(st) != 2 || st[0] != (Session{PID: 20}) && st[0] != (Session{PID: 21}) {
		t.Errorf("stranded %v, want 20 and 21", st)
	}
	if got := g.Waiters(Session{PID: 1}); len(got) != 2 {
		t.Errorf("waiters of 1: %v", got)
	}
}
