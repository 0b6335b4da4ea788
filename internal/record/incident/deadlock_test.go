package incident

import (
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// A cycle through an advisory lock and a Redis key, shown by three
// snapshots, is one deadlock found by the second; a cycle shown once is
// none.
func TestReportDeadlocks(t *testing.T) {
	at := time.Date(2026, 3, 14, 3, 0, 0, 0, time.UTC)
	cycle := func(i int) model.Snapshot {
		t := at.Add(time.Duration(i) * time.Second)
		return model.Snapshot{Taken: t, Locks: []model.Lock{
			{Kind: model.KindAdvisory, PID: 10, Owner: "x", Namespace: "AGENT", EntityID: 7, Pair: true, Mode: model.ModeExclusive, Granted: true},
			{Kind: model.KindAdvisory, PID: 11, Owner: "y", Namespace: "AGENT", EntityID: 7, Pair: true, Mode: model.ModeExclusive, WaitStart: at, BlockedBy: []int32{10}},
			{Kind: model.KindRedis, Name: "K", Owner: "y", Mode: "exclusive", Granted: true, Source: 1},
			{Kind: model.KindRedis, Name: "K", Owner: "x", Mode: "exclusive", WaitStart: at, BlockedByOwners: []string{"y"}, Source: 1},
		}}
	}
	calm := func(i int) model.Snapshot { return model.Snapshot{Taken: at.Add(time.Duration(i) * time.Second)} }
	f := frames{cycle(0), calm(1), cycle(2), cycle(3), cycle(4), calm(5)}
	r, err := Build(f, "test", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Deadlocks) != 1 {
		t.Fatalf("%d deadlocks, want 1: %+v", len(r.Deadlocks), r.Deadlocks)
	}
	d := r.Deadlocks[0]
	if d.Kinds != "advisory+redis" || d.ServerResolves || !d.Found.Equal(at.Add(3*time.Second)) || !d.Last.Equal(at.Add(4*time.Second)) {
		t.Errorf("deadlock %+v", d)
	}
	if len(d.Waits) != 2 || d.Waits[0].Key != "K" || d.Waits[1].Key != "AGENT 7" || d.Waits[0].Waiter != "owner x (pid 10)" {
		t.Errorf("waits %+v", d.Waits)
	}
	var b strings.Builder
	if err := r.WriteText(&b, TextOptions{Location: time.UTC}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "owner x (pid 10) → owner y (pid 11) on redis K") {
		t.Errorf("the text report does not show the deadlock:\n%s", b.String())
	}
}
