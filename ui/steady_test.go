package ui

import (
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// The layout holds still while the content changes shape for less than
// settle: at 160×50 with the simulator, an empty table for a second
// neither flips the panels side by side nor drops the table's columns;
// a shape that holds for settle is taken; a resize takes it at once.
func TestLayoutHoldsStill(t *testing.T) {
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: everyKind()}}}
	hs := newHarness(t, Options{Source: src, Simulator: &fakeSim{status: demoStatus()}})
	now := t0
	hs.m.now = func() time.Time { return now }
	hs.start(160, 50)
	shape := func() (arrangement, string, int) {
		v := ansi.Strip(hs.view())
		head := ""
		for _, l := range strings.Split(v, "\n") {
			if strings.Contains(l, "STATE") {
				head = strings.Join(strings.Fields(l), " ")
				break
			}
		}
		return hs.m.lay, head, hs.m.gauges.Height()
	}
	lay0, head0, g0 := shape()
	if !strings.Contains(head0, "KIND") || !strings.Contains(head0, "MODE") {
		t.Fatalf("no KIND and MODE to begin with: %q", head0)
	}
	empty := model.Snapshot{Taken: t0, Connections: 5, Interval: time.Second}
	one := model.Snapshot{Taken: t0, Connections: 5, Interval: time.Second, Locks: []model.Lock{held(lock("AGENT", 1, 100, "x", true), time.Second)}}
	// A second of empty table, a second of one advisory lock, back: the
	// shape holds.
	for i, s := range []model.Snapshot{empty, one, everyKind(), empty, one} {
		now = t0.Add(time.Duration(i+1) * 900 * time.Millisecond)
		hs.send(SnapshotMsg{Snapshot: s})
		if lay, head, g := shape(); lay != lay0 || head != head0 || g != g0 {
			t.Fatalf("after %d snapshots of %v, the shape changed: %v %q %d lines of gauges, was %v %q %d",
				i+1, now.Sub(t0), lay, head, g, lay0, head0, g0)
		}
	}
	// One advisory lock for settle and more: the table and gauges take it.
	for i := range 5 {
		now = now.Add(time.Second)
		hs.send(SnapshotMsg{Snapshot: one})
		_ = i
	}
	if _, head, g := shape(); head == head0 || g == g0 {
		t.Errorf("after %v of one advisory lock the shape is still the old one: %q, %d lines of gauges", 5*time.Second, head, g)
	}
	// A resize takes the content's shape at once.
	hs.send(SnapshotMsg{Snapshot: everyKind()})
	hs.send(tea.WindowSizeMsg{Width: 120, Height: 40})
	if _, head, _ := shape(); !strings.Contains(head, "KIND") {
		t.Errorf("after a resize the table does not take its content's columns: %q", head)
	}
}

// A shape is held by giving more room at once and less only after
// settle: waiters that appear under holders show "waits #1" whole at once.
func TestLayoutGrowsAtOnce(t *testing.T) {
	holders := model.Snapshot{Taken: t0, Interval: time.Second, Locks: []model.Lock{
		held(lock("AGENT", 1, 100, "x", true), time.Second), held(lock("AGENT", 2, 101, "x", true), time.Second)}}
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: holders}}}
	hs := newHarness(t, Options{Source: src})
	hs.start(100, 30)
	queue := holders
	queue.Locks = append(queue.Locks[:1:1], waiting(lock("AGENT", 1, 102, "x", false), 1, 2*time.Second, 100), queue.Locks[1])
	hs.send(SnapshotMsg{Snapshot: queue})
	if v := ansi.Strip(hs.view()); !hasLine(v, "waits #1", "102", "100") {
		t.Errorf("a waiter that appears is not shown whole at once:\n%s", v)
	}
}
