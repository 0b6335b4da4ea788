package ui

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// crossDeadlock is process x (backend 10) holding AGENT 7 and waiting for
// Redis key sesslock:K, held by process y, whose backend 11 waits for
// AGENT 7: one cycle through two systems, which no server sees.
func crossDeadlock() model.Snapshot {
	x, y := model.AppWithOwner("sim deadlock", "x"), model.AppWithOwner("sim deadlock", "y")
	hold := lock("AGENT", 7, 10, x, true)
	hold.Owner = "x"
	wait := waiting(lock("AGENT", 7, 11, y, false), 1, 3*time.Second, 10)
	wait.Owner = "y"
	return model.Snapshot{Taken: t0, Locks: []model.Lock{
		held(hold, 10*time.Second), wait,
		{Kind: model.KindRedis, Name: "sesslock:K", Owner: "y", Mode: "exclusive", Granted: true, HeldSince: t0.Add(-5 * time.Second)},
		{Kind: model.KindRedis, Name: "sesslock:K", Owner: "x", Mode: "exclusive", WaitStart: t0.Add(-2 * time.Second), BlockedByOwners: []string{"y"}, QueuePos: 1},
	}}
}

func TestDeadlockAfterTwoPolls(t *testing.T) {
	var terminated []int32
	var counted []string // what Options.Deadlocks was told: the metrics' count
	opts := Options{Terminate: func(_ context.Context, pid int32) error { terminated = append(terminated, pid); return nil },
		Deadlocks: func(fresh []waitfor.Cycle) {
			for i := range fresh {
				counted = append(counted, fresh[i].KindsLabel())
			}
		}}
	h := newHarness(t, opts)
	h.src.results = []SnapshotMsg{{Snapshot: crossDeadlock()}}
	h.start(120, 30)
	if strings.Contains(h.view(), "DEADLOCK") {
		t.Fatalf("a cycle seen once is reported:\n%s", ansi.Strip(h.view()))
	}
	h.keys("D")
	if isOpen[*deadlockView](h) {
		t.Fatal("D opens the deadlocks with none")
	}
	h.send(SnapshotMsg{Snapshot: crossDeadlock()})
	v := ansi.Strip(h.view())
	if !strings.Contains(v, "DEADLOCK advisory+redis: owner x (pid 10) ⇄ owner y (pid 11) · no server sees it") {
		t.Fatalf("no deadlock banner after two polls:\n%s", v)
	}
	golden(t, "deadlock_banner_120x30", h.view())
	if n := slices.IndexFunc(h.notes(), func(s string) bool { return strings.HasPrefix(s, "deadlock advisory+redis: ") }); n < 0 {
		t.Errorf("no deadlock event: %q", h.notes())
	}
	h.send(SnapshotMsg{Snapshot: crossDeadlock()})
	deadlockEvents := 0
	for _, s := range h.notes() {
		if strings.HasPrefix(s, "deadlock ") {
			deadlockEvents++
		}
	}
	if deadlockEvents != 1 || !slices.Equal(counted, []string{"advisory+redis"}) {
		t.Errorf("%d deadlock events, counted %q, for one deadlock seen three times", deadlockEvents, counted)
	}
	h.keys("D")
	if !isOpen[*deadlockView](h) {
		t.Fatal("D does not open the deadlock details")
	}
	golden(t, "deadlock_details_120x30", h.view())
	h.keys("T")
	c, ok := opened[*chooser](h)
	if !ok {
		t.Fatalf("T does not offer to break the cycle:\n%s", ansi.Strip(h.view()))
	}
	if want := []string{"terminate backend 11 (sim deadlock owner=y)", "terminate backend 10 (sim deadlock owner=x)"}; !slices.Equal(c.items, want) {
		t.Errorf("ways to break it %q, want %q", c.items, want)
	}
	h.keys("enter")
	if !isOpen[*confirm](h) {
		t.Fatal("choosing does not ask to confirm")
	}
	h.keys("y")
	if !slices.Equal(terminated, []int32{11}) {
		t.Errorf("terminated %v, want [11]", terminated)
	}
	calm := sample()
	h.send(SnapshotMsg{Snapshot: calm})
	if strings.Contains(ansi.Strip(h.view()), "DEADLOCK") {
		t.Error("the banner stays after the cycle is gone")
	}
}

// Read-only, the details say how to break it and T does not.
func TestDeadlockReadOnly(t *testing.T) {
	h := newHarness(t, Options{})
	h.src.results = []SnapshotMsg{{Snapshot: crossDeadlock()}}
	h.start(120, 30)
	h.send(SnapshotMsg{Snapshot: crossDeadlock()})
	h.keys("D", "T")
	if !isOpen[*deadlockView](h) {
		t.Fatal("T closed the details read-only")
	}
	if v := ansi.Strip(h.view()); !strings.Contains(v, "--allow-terminate") {
		t.Errorf("the read-only details do not say what breaks it:\n%s", v)
	}
}
