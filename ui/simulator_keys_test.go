package ui

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

func TestSimulatorControls(t *testing.T) {
	sim := &fakeSim{status: simStatus()}
	h := newHarness(t, Options{Simulator: sim})
	h.start(100, 30)
	if h.m.simp.status.Scenario != "steady" || len(h.m.gauges.pools) != 2 {
		t.Fatalf("status not read: %+v pools %d", h.m.simp.status.Scenario, len(h.m.gauges.pools))
	}
	h.keys("s")
	if c, ok := opened[*chooser](h); !ok || c.items[c.cursor] != "steady" {
		t.Fatal("s does not open the scenarios at the current one")
	}
	h.keys("down", "enter")
	h.keys("+", "-", "l", "i", "down", "enter")
	h.keys("i", "esc") // cancelled: nothing injected
	want := []string{"scenario burst", "rates 1.2", "rates 0.8", "locks off", "fault pool-drain"}
	if got := sim.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	notes := h.notes()
	if want := []string{"scenario burst", "rates ×1.25 (3 rates)", "rates ×0.8 (3 rates)", "locks off: the races are allowed", "injected fault pool-drain"}; !slices.Equal(notes, want) {
		t.Errorf("event log %q, want %q", notes, want)
	}
	// A failed action is an error in the footer, not a crash.
	sim.failNext = errors.New("no scenario named burst2")
	h.keys("s", "enter")
	if !h.m.footer.isErr || !strings.Contains(h.m.footer.status, "no scenario named burst2") {
		t.Errorf("status %q", h.m.footer.status)
	}
}

// ] and [ add and remove simulator workers.
func TestWorkersKeys(t *testing.T) {
	sim := &fakeSim{status: simStatus()}
	h := newHarness(t, Options{Simulator: sim})
	h.start(100, 30)
	h.keys("]", "[")
	if got, want := sim.Calls(), []string{"workers 1.2", "workers 0.8"}; !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	if h.m.footer.status != "workers ×0.8: 42 goroutines" {
		t.Errorf("status %q", h.m.footer.status)
	}
}

func TestSimulatorKeysWithoutSimulator(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(80, 24)
	for _, k := range []string{"s", "+", "-", "]", "[", "l", "i"} {
		h.m.footer.status = ""
		h.keys(k)
		if !strings.Contains(h.m.footer.status, "no simulator") || h.m.overlay != nil {
			t.Errorf("%s without a simulator: status %q", k, h.m.footer.status)
		}
	}
}

func TestSimulatorEvents(t *testing.T) {
	sim := &fakeSim{status: simStatus()}
	h := newHarness(t, Options{Simulator: sim})
	h.start(100, 30)
	ev := model.Event{Time: t0, Worker: "hook", Outcome: model.OutcomeTimeout, Key: "AGENT 7", Wait: 15 * time.Second}
	h.send(eventsMsg{events: []model.Event{ev}})
	if h.m.events.total != 1 {
		t.Fatalf("%d events", h.m.events.total)
	}
	// Paused: events are kept aside, then shown on resume.
	h.keys("space")
	h.send(eventsMsg{events: []model.Event{ev, ev}})
	if h.m.events.total != 1 || len(h.m.held) != 2 {
		t.Fatalf("paused: %d shown, %d held", h.m.events.total, len(h.m.held))
	}
	h.keys("space")
	if h.m.events.total != 3 || len(h.m.held) != 0 {
		t.Fatalf("resumed: %d shown, %d held", h.m.events.total, len(h.m.held))
	}
	// Monitor diffs are off with a simulator: it reports its own events.
	s := sample()
	s.Locks = s.Locks[:1]
	h.send(SnapshotMsg{Snapshot: s})
	if h.m.events.total != 3 {
		t.Errorf("snapshot diffs logged beside the simulator's events: %d", h.m.events.total)
	}
}

// A broken invariant in the event stream reads the simulator's status at
// once, not with the next poll, which a slow interval or a reconnect's
// backoff can put far off: the panel must not say fewer invariants are
// broken than the event log already names.
func TestViolationEventReadsTheSimulatorStatus(t *testing.T) {
	ended := make(chan model.Event)
	close(ended)
	sim := &fakeSim{status: simStatus(), events: ended}
	h := newHarness(t, Options{Simulator: sim})
	h.start(100, 30)
	sim.mu.Lock()
	sim.status.Invariants = slices.Clone(sim.status.Invariants) // the panel holds the old slice
	for i := range 3 {
		sim.status.Invariants[i].Violations = 1
	}
	sim.mu.Unlock()
	ev := model.Event{Time: t0, Worker: "check", Outcome: model.OutcomeViolation, Detail: "no lost update: AGENT 1"}
	h.step(eventsMsg{events: []model.Event{ev}})
	broken := 0
	for _, inv := range h.m.simp.status.Invariants {
		if inv.Violations > 0 {
			broken++
		}
	}
	if broken != 3 {
		t.Errorf("the panel shows %d invariants broken after the event, want the simulator's 3", broken)
	}
}
