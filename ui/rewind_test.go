package ui

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// The rewind key takes the live dashboard onto its history's timeline at
// its newest moment; the header says plainly it is not live and which
// moment it shows; polling goes on underneath without disturbing the
// screen; the live key returns to what the sources answer now.
func TestRewindAndBackToLive(t *testing.T) {
	hist := recorded()
	live := model.Snapshot{Taken: t0.Add(time.Minute), Locks: []model.Lock{lock("AGENT", 42, 5000, "live.now", true)}}
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: live}}}
	h := newHarness(t, Options{Source: src, Server: "monitor@db.internal:5432/app", History: func() (Replay, error) { return hist, nil }})
	h.start(120, 30)
	if v := ansi.Strip(h.view()); !strings.Contains(v, "42") || strings.Contains(v, "REWOUND") {
		t.Fatalf("live, before the rewind:\n%s", v)
	}

	h.keys("b")
	if h.m.rewound == nil || h.m.replay.pos != hist.Len()-1 {
		t.Fatal("the rewind key did not open the history at its newest moment")
	}
	h.keys("left", "left", "left")
	if h.m.replay.pos != 1 {
		t.Fatalf("at step %d after three steps back, want 1", h.m.replay.pos)
	}
	v := ansi.Strip(h.view())
	header := strings.Split(v, "\n")[0]
	if !strings.Contains(header, "REWOUND · NOT LIVE") || !strings.Contains(header, "at 15:04:06") {
		t.Fatalf("the header does not say which moment is shown: %q", header)
	}
	if strings.Contains(v, "live.now") || !strings.Contains(v, "4250") {
		t.Fatalf("the rewound screen is not the history's:\n%s", v)
	}
	golden(t, "rewind_120x30", h.view())

	// The loop goes on: a tick polls, and the answer is kept, not shown.
	polls := src.polls
	h.step(h.tick())
	if src.polls != polls+1 {
		t.Fatalf("polls %d → %d: the loop stopped while rewound", polls, src.polls)
	}
	if v := ansi.Strip(h.view()); strings.Contains(v, "live.now") || h.m.replay.pos != 1 {
		t.Fatalf("a live answer disturbed the rewound screen:\n%s", v)
	}

	h.keys("L")
	v = ansi.Strip(h.view())
	if h.m.rewound != nil || h.m.replay != nil || strings.Contains(v, "REWOUND") || !strings.Contains(v, "live.now") {
		t.Fatalf("the live key did not return to live:\n%s", v)
	}
	if !h.m.keys.Refresh.Enabled() || !h.m.keys.Rewind.Enabled() || h.m.keys.Live.Enabled() {
		t.Fatal("the live keys are not back")
	}
}

// Without a history the rewind key says why it does nothing.
func TestRewindWithoutHistory(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(120, 30)
	h.keys("b")
	if h.m.rewound != nil || !strings.Contains(ansi.Strip(h.view()), "no history to rewind") {
		t.Fatal("the rewind key without a history")
	}
}

// A failed poll in a recording shows as the outage banner it was, and
// the next answer clears it.
func TestReplayShowsRecordedOutage(t *testing.T) {
	rep := recorded()
	rep.snaps[2] = model.Outage("PostgreSQL", errors.New("connection refused"), rep.snaps[2].Taken)
	h := newHarness(t, Options{Replay: rep, Server: "monitor@db.internal:5432/app"})
	h.start(120, 30)
	h.keys("right", "right")
	if v := ansi.Strip(h.view()); !strings.Contains(v, "no connection (recorded") || !strings.Contains(v, "connection refused") {
		t.Fatalf("no outage banner at the failed poll:\n%s", v)
	}
	h.keys("right")
	if v := ansi.Strip(h.view()); strings.Contains(v, "no connection") {
		t.Fatalf("the banner stays after the source answered again:\n%s", v)
	}
}

// The rewound view shows a recorded outage's banner as it was, at the
// moment shown; the live sources' state is untouched, and the return to
// live shows the live banner state again (here: none).
func TestRewindShowsRecordedOutage(t *testing.T) {
	hist := recorded()
	hist.snaps[2] = model.Outage("PostgreSQL", errors.New("connection refused"), hist.snaps[2].Taken)
	live := model.Snapshot{Taken: t0.Add(time.Minute), Locks: []model.Lock{lock("AGENT", 42, 5000, "live.now", true)}}
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: live}}}
	h := newHarness(t, Options{Source: src, Server: "monitor@db.internal:5432/app", History: func() (Replay, error) { return hist, nil }})
	h.start(120, 30)
	h.keys("b", "left", "left")
	if h.m.replay.pos != 2 {
		t.Fatalf("at step %d, want 2", h.m.replay.pos)
	}
	v := h.view()
	if s := ansi.Strip(v); !strings.Contains(s, "no connection (recorded") || !strings.Contains(s, "connection refused") ||
		!strings.Contains(s, "showing 15:04:06") {
		t.Fatalf("no recorded outage banner (showing the answer before it) in the rewound view:\n%s", s)
	}
	golden(t, "rewind_outage_120x30", v)
	if f := h.m.poll.feeds[0]; f.conn != connOK {
		t.Fatalf("the recorded outage changed the live feed: %+v", f)
	}
	h.keys("right")
	if s := ansi.Strip(h.view()); strings.Contains(s, "no connection") {
		t.Fatalf("the banner stays after the source answered again:\n%s", s)
	}
	h.keys("left", "L")
	if s := ansi.Strip(h.view()); strings.Contains(s, "no connection") || !strings.Contains(s, "live.now") {
		t.Fatalf("back to live, the recorded banner stays:\n%s", s)
	}
}
