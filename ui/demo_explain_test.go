package ui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// The pickers say what the highlighted scenario or fault runs and what to
// watch for.
func TestPickersExplainTheirItems(t *testing.T) {
	hs := newHarness(t, Options{Simulator: &fakeSim{status: simStatus()}})
	hs.start(100, 30)
	hs.keys("s", "down")
	if v := ansi.Strip(hs.view()); !strings.Contains(v, "runs burst · watch the queue") {
		t.Errorf("the scenario picker does not explain burst:\n%s", v)
	}
	hs.keys("esc", "i")
	if v := ansi.Strip(hs.view()); !strings.Contains(v, "injects kill-holder · watch the event log") {
		t.Errorf("the fault picker does not explain kill-holder:\n%s", v)
	}
}

// i offers the faults of the scenario running now, not those of the one
// that ran when the dashboard started.
func TestFaultsFollowTheScenario(t *testing.T) {
	hs := newHarness(t, Options{Simulator: &fakeSim{status: simStatus()}})
	hs.start(100, 30)
	hs.sim.mu.Lock()
	hs.sim.faults = []string{"pod-crash", "redis-outage"}
	hs.sim.status.Scenario = "acf"
	hs.sim.mu.Unlock()
	hs.step(hs.tick()) // the next poll reads the simulator's status
	hs.keys("i")
	c, ok := opened[*chooser](hs)
	if !ok || !slices.Equal(c.items, []string{"pod-crash", "redis-outage"}) {
		t.Errorf("i offers %v, want the acf scenario's faults", c.items)
	}
}

// lock waits/s says what it counts and how many wait now; a filtered
// title counts what the filter keeps.
func TestGaugesAndTitleSayWhatTheyCount(t *testing.T) {
	hs := pileDashboard(t, 120, 36)
	v := ansi.Strip(hs.view())
	if !hasLine(v, "lock waits/s", "new", "11 waiting now") {
		t.Errorf("lock waits/s does not say it counts new waits, nor how many wait now:\n%s", v)
	}
	hs.keys("/")
	hs.typeText("ns:AGENT")
	hs.keys("enter")
	v = ansi.Strip(hs.view())
	if !strings.Contains(v, `filter "ns:AGENT": 2 keys of 5 · 2 held · 3 waiting`) {
		t.Errorf("the filtered title does not count what the filter keeps:\n%s", v)
	}
}

// The ACF scenario's pods crash on purpose: a lost turn is routine there,
// not an alarm styled as one, and it does not stay pinned.
func TestRoutineTurnLostIsNoAlarm(t *testing.T) {
	st := DefaultStyles()
	e := eventLog{st: &st}
	e.SetSize(100, 8)
	e.Add(model.Event{Time: t0, Worker: "turn", Outcome: model.OutcomeLost, Key: "sesslock:t1:a1:c1:web", Detail: "lock lost while held · aborted: the fence refused its write", Contained: true})
	if len(e.rare) != 0 {
		t.Errorf("a routine lost turn is pinned as rare: %+v", e.rare)
	}
	e.Add(model.Event{Time: t0.Add(time.Second), Worker: "hook", Outcome: model.OutcomeLost, Key: "AGENT 7"})
	if len(e.rare) != 1 {
		t.Errorf("a lost hook lock is not kept as rare: %+v", e.rare)
	}
}
