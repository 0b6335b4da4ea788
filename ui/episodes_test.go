package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// The live event log tells a contention episode as the report does: a
// line when it begins (its keys, how many wait, the root blocker with its
// hold) and one when it ends (how long, the peak, the time waited, the
// root). The episodes under way when the dashboard starts are not told as
// beginning; their end is.
func TestEventLogTellsEpisodes(t *testing.T) {
	quiet := model.Snapshot{Taken: t0, Locks: []model.Lock{lock("AGENT", 42, 5000, "live.now", true)}}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pile := func(s int) model.Snapshot {
		snap := model.Snapshot{Taken: at(s), Locks: []model.Lock{lock("AGENT", 42, 5000, "live.now", true)}}
		h := lock("AGENT", 7, 4242, "report", true)
		h.HeldSince = at(-60)
		snap.Locks = append(snap.Locks, h, waiting(lock("AGENT", 7, 4250, "migration", false), 1, -time.Second, 4242))
		if s >= 3 {
			snap.Locks = append(snap.Locks, waiting(lock("AGENT", 7, 4251, "hook.stop", false), 2, -3*time.Second, 4242))
		}
		return snap
	}
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: quiet}}}
	h := newHarness(t, Options{Source: src, Server: "monitor@db.internal:5432/app"})
	h.start(120, 30)
	for s := 1; s <= 5; s++ {
		snap := pile(s)
		if s == 5 {
			snap = model.Snapshot{Taken: at(5), Locks: quiet.Locks}
		}
		src.results = []SnapshotMsg{{Snapshot: snap}}
		h.step(h.tick())
	}
	v := ansi.Strip(h.m.events.View())
	if !hasLine(v, "episode", "AGENT 7", "began, 1 waiting, root 4242 report ≥") ||
		!hasLine(v, "episode", "AGENT 7", "ended after 4.0s, peak 2, waited", "root 4242 report ≥1m04s") {
		t.Fatalf("the episode is not told:\n%s", v)
	}
	golden(t, "events_episode_120x8", h.m.events.View())

	// Started in the middle of a pile-up: its beginning is not told.
	src2 := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: pile(3)}}}
	h2 := newHarness(t, Options{Source: src2})
	h2.start(120, 30)
	if v := ansi.Strip(h2.m.events.View()); strings.Contains(v, "began") {
		t.Fatalf("an episode under way at start is told as beginning:\n%s", v)
	}
}

// A session the dashboard terminated does not read as having released its
// locks: its rows end as "ended", terminated by locktop (the terminated
// root of a pile-up read "released").
func TestTerminatedReadsAsEnded(t *testing.T) {
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: sample()}}}
	h := newHarness(t, Options{Source: src, Terminate: func(context.Context, int32) error { return nil }})
	h.start(120, 30)
	h.keys("T", "y") // the first row: 4242, AGENT 7's holder
	after := sample()
	after.Taken = t0.Add(time.Second)
	var kept []model.Lock
	for _, l := range after.Locks {
		if l.PID != 4242 {
			kept = append(kept, l)
		}
	}
	after.Locks = kept
	src.results = []SnapshotMsg{{Snapshot: after}}
	h.step(h.tick())
	v := ansi.Strip(h.m.events.View())
	if hasLine(v, "released", "4242") || !hasLine(v, "ended", "AGENT 7", "terminated by locktop") {
		t.Fatalf("the terminated holder:\n%s", v)
	}
}
