package waitfor

import (
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// The lock family stamps one owner id per process. Two backends of one
// process (a pool: the dashboard's own end-to-end holder and waiter) wait
// for each other as any two sessions do: the holder is a root with one
// waiter, not a process waiting for itself. An owner with one backend is
// still that backend's node, joined to its Redis locks.
func TestOwnerWithSeveralBackendsKeepsThemApart(t *testing.T) {
	h, w := holds(10, "(0,1)"), waits(11, "(0,1)", 5*time.Second, 10)
	h.Owner, w.Owner = "proc-a", "proc-a"
	snap := model.Snapshot{Taken: t0, Locks: []model.Lock{h, w}}
	g := Build(&snap)
	r, ok := g.Root(Of(&snap.Locks[0]))
	if !ok || r.Direct != 1 {
		t.Fatalf("root of the holder: %+v, %v; want a root with one waiter", r, ok)
	}

	one := holds(20, "(0,2)")
	one.Owner = "proc-b"
	redis := model.Lock{Kind: model.KindRedis, Name: "k", Owner: "proc-c", WaitStart: t0.Add(-time.Second), BlockedByOwners: []string{"proc-b"}}
	snap = model.Snapshot{Taken: t0, Locks: []model.Lock{one, {Kind: model.KindRedis, Name: "k", Owner: "proc-b", Granted: true}, redis}}
	g = Build(&snap)
	if got := g.Blockers(Session{Owner: "proc-c"}); len(got) != 1 || got[0] != (Session{Owner: "proc-b"}) {
		t.Errorf("proc-c's blockers %v, want proc-b", got)
	}
	if n := g.lookup(Of(&snap.Locks[0])); n < 0 || g.order[n] != (Session{Owner: "proc-b"}) {
		t.Errorf("the one backend of proc-b is not proc-b's node")
	}
}
