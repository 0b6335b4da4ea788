package ui

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// What the operator reads at the common terminal sizes (issue 14, "The
// screen"): each test here failed on the dashboard as it was observed.

// demo starts a dashboard with the demo's simulator and locks at w×h, one
// second of its events received.
func demo(t *testing.T, w, h int) *harness {
	t.Helper()
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: demoSnapshot()}}}
	hs := newHarness(t, Options{Source: src, Simulator: &fakeSim{status: demoStatus()}})
	hs.start(w, h)
	hs.send(eventsMsg{events: demoEvents(t0)})
	return hs
}

var commonSizes = [][2]int{{80, 24}, {120, 36}, {200, 60}}

// The table gives its columns what their content needs: the application
// is never cut to "locktop…" while the table has room, and the title keeps
// the filter's match count.
func TestLayoutGivesColumnsTheirContent(t *testing.T) {
	for _, sz := range commonSizes {
		hs := demo(t, sz[0], sz[1])
		hs.keys("/")
		hs.typeText("ns:AGENT")
		hs.keys("enter")
		v := ansi.Strip(hs.view())
		checkFrame(t, hs.view(), sz[0], sz[1])
		rows := 0
		for _, l := range strings.Split(v, "\n") {
			if strings.Contains(l, "holds ") || strings.Contains(l, "waits #") {
				rows++
				if !strings.Contains(l, "locktop.lock") {
					t.Errorf("%dx%d: a row does not show its application whole: %q", sz[0], sz[1], l)
				}
			}
		}
		if rows < 5 {
			t.Errorf("%dx%d: %d rows of locks on screen:\n%s", sz[0], sz[1], rows, v)
		}
		if !strings.Contains(v, `filter "ns:AGENT": 3 keys`) {
			t.Errorf("%dx%d: the filter's match count is cut:\n%s", sz[0], sz[1], v)
		}
	}
}

// The side panel gets its readable width or goes under the table: every
// rate is shown whole, no event line is cut, and where the panel is wide
// the events' details are whole.
func TestLayoutSidePanelReadable(t *testing.T) {
	for _, sz := range commonSizes[1:] {
		hs := demo(t, sz[0], sz[1])
		v := ansi.Strip(hs.view())
		for _, r := range demoStatus().Rates {
			if !strings.Contains(v, r.Name+" "+simRate(r.Value)) {
				t.Errorf("%dx%d: rate %q is cut:\n%s", sz[0], sz[1], r.Name, v)
			}
		}
		lines := eventLines(v)
		if len(lines) == 0 {
			t.Fatalf("%dx%d: no event panel:\n%s", sz[0], sz[1], v)
		}
		for _, l := range lines {
			if strings.HasSuffix(strings.TrimRight(l, " "), "…") {
				t.Errorf("%dx%d: an event line is cut: %q", sz[0], sz[1], l)
			}
		}
		if sz[0] < 200 {
			continue
		}
		for _, want := range []string{"row locked by another transaction", "already COMPLETE: skipped"} {
			if !strings.Contains(v, want) {
				t.Errorf("%dx%d: no event line shows %q whole:\n%s", sz[0], sz[1], want, v)
			}
		}
	}
}

// eventLines returns the lines of the event panel on screen (under its
// title, up to the next panel or the footer).
func eventLines(v string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(v, "\n") {
		if strings.Contains(l, "Events ") {
			in = true
			continue
		}
		if in {
			if strings.HasPrefix(l, "q quit") {
				break
			}
			// Side by side, the panel is right of the last separator.
			if i := strings.LastIndex(l, "│"); i >= 0 {
				l = l[i+len("│"):]
			}
			out = append(out, l)
		}
	}
	return out
}

// The demo sends about 34 events a second: repeated ones are aggregated,
// per kind and key per second, so the log can be read live.
func TestEventLogAggregatesRepeats(t *testing.T) {
	st := DefaultStyles()
	e := eventLog{st: &st}
	e.SetSize(120, 40)
	e.Add(demoEvents(t0)...)
	v := ansi.Strip(e.View())
	lines := 0
	for _, l := range strings.Split(v, "\n")[1:] {
		if strings.TrimSpace(l) != "" {
			lines++
		}
	}
	if lines > 12 {
		t.Errorf("one second of 34 events takes %d lines:\n%s", lines, v)
	}
	if !strings.Contains(v, "×") {
		t.Errorf("no aggregated line:\n%s", v)
	}
}

// A rare event (a timeout, a loss, a violation) stays in view while the
// common ones stream past it.
func TestEventLogKeepsRareEventsLonger(t *testing.T) {
	st := DefaultStyles()
	e := eventLog{st: &st}
	e.SetSize(120, 7)
	e.Add(model.Event{Time: t0, Worker: "stop", Outcome: model.OutcomeTimeout, Key: "AGENT 7", Wait: 15 * time.Second})
	for s := 1; s <= 10; s++ {
		e.Add(demoEvents(t0.Add(time.Duration(s) * time.Second))...)
	}
	if v := ansi.Strip(e.View()); !strings.Contains(v, "timeout") || !strings.Contains(v, "AGENT 7") {
		t.Errorf("the timeout of 10 s ago is gone:\n%s", v)
	}
}

// The details overlay wraps between words, never inside a number or a
// word, and nothing of the screen under it shows beside it.
func TestDetailsWrapWholeWordsAndCoverTheScreen(t *testing.T) {
	snap := sample()
	l := held(lock("AGENT", 7, 885, "a-rather-long-application-name.for-wrapping", true), 12*time.Second)
	l.OwnBackend().ClientAddr = "192.168.100.200"
	snap.Locks = append([]model.Lock{l}, snap.Locks[1:]...)
	snap.Locks[1].BlockedBy, snap.Locks[2].BlockedBy = []int32{885}, []int32{885}
	for _, sz := range [][2]int{{80, 24}, {100, 30}, {120, 36}} {
		hs := newHarness(t, Options{Source: &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: snap}}}})
		hs.start(sz[0], sz[1])
		hs.keys("enter")
		v := ansi.Strip(hs.view())
		lines := strings.Split(v, "\n")
		// The words below the fold are read by scrolling.
		var seen []string
		for range 6 {
			seen = append(seen, strings.Split(ansi.Strip(hs.view()), "\n")...)
			hs.keys("pgdown")
		}
		st := DefaultStyles()
		content := ansi.Strip(describeLock(&st, &snap, &snap.Locks[0], "app", nil, 200))
		for _, word := range strings.Fields(content) {
			if ansi.StringWidth(word) > sz[0]-8 {
				continue
			}
			found := false
			for _, line := range seen {
				if strings.Contains(line, word) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%dx%d: %q is split across lines:\n%s", sz[0], sz[1], word, v)
			}
		}
		// Beside the box: blanks only.
		in := false
		for i, line := range lines {
			if strings.Contains(line, "╭") {
				in = true
			}
			if !in {
				continue
			}
			left := strings.IndexAny(line, "╭│╰")
			right := strings.LastIndexAny(line, "╮│╯")
			if left < 0 || right < 0 {
				continue
			}
			if strings.TrimSpace(line[:left]) != "" || strings.TrimSpace(line[right+len("│"):]) != "" {
				t.Errorf("%dx%d: line %d shows the screen beside the details: %q", sz[0], sz[1], i, line)
			}
			if strings.Contains(line, "╰") {
				break
			}
		}
	}
}

// "ns:AGENT 1" contains: it also finds AGENT 12, 122 and 147. The exact
// forms find AGENT 1 alone; a string of a hashed pattern finds its key.
func TestFilterExactAndHashedKeys(t *testing.T) {
	var snap model.Snapshot
	for _, id := range []int64{1, 12, 122, 147} {
		snap.Locks = append(snap.Locks, held(lock("AGENT", id, int32(1000+id), "x", true), time.Second))
	}
	booking := held(lock("", int64(registry.FNV1a32("tenant-a:2025-01-15")), 2000, "booking", true), time.Second)
	booking.Pair = false
	snap.Locks = append(snap.Locks, booking)
	count := func(f string) int {
		fl := parseFilter(f)
		n := 0
		for i := range snap.Locks {
			if fl.match(&snap.Locks[i]) {
				n++
			}
		}
		return n
	}
	for f, want := range map[string]int{
		"ns:AGENT 1":          4,
		"ns:AGENT =1":         1,
		`key:"AGENT 1"`:       1,
		`key:"agent 12"`:      1,
		"ns:AGENT =147":       1,
		"tenant-a:2025-01-15": 1,
		"tenant-a:2025-01-16": 0,
	} {
		if got := count(f); got != want {
			t.Errorf("filter %q matches %d rows, want %d", f, got, want)
		}
	}
	if d := parseFilter("tenant-a:2025-01-15").describe(); !strings.Contains(d, "BOOKING_DATE") {
		t.Errorf("the title does not name the hashed pattern: %s", d)
	}
}

// Without colour the severity marker of the longest waits is whole.
func TestNoColorMarkOnLongestWaits(t *testing.T) {
	snap := sample()
	snap.Locks[1] = waiting(lock("AGENT", 7, 4250, "hook.stop", false), 1, 12*time.Minute+5*time.Second, 4242)
	for _, w := range []int{80, 120} {
		hs := newHarness(t, Options{Source: &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: snap}}}})
		hs.start(w, 30)
		hs.send(tea.ColorProfileMsg{Profile: colorprofile.ASCII})
		hs.keys("end")
		if v := ansi.Strip(hs.view()); !strings.Contains(v, "12m05s !!") {
			t.Errorf("%d cells: the !! of a 12m05s wait is cut:\n%s", w, v)
		}
	}
}

// q quits from every overlay and picker; only while the filter is being
// typed is it text.
func TestQQuitsEverywhereButTheFilter(t *testing.T) {
	quits := func(hs *harness) bool {
		cmd := hs.send(press("q"))
		if cmd == nil {
			return false
		}
		_, ok := cmd().(tea.QuitMsg)
		return ok
	}
	for _, open := range []string{"s", "i", "?", "enter", "T"} {
		hs := newHarness(t, Options{Simulator: &fakeSim{status: simStatus()}, Terminate: func(context.Context, int32) error { return nil }})
		hs.start(100, 30)
		hs.keys(open)
		if !quits(hs) {
			t.Errorf("q after %q does not quit", open)
		}
	}
	hs := newHarness(t, Options{})
	hs.start(100, 30)
	hs.keys("/")
	if quits(hs) {
		t.Error("q while typing the filter quits")
	}
}

// A holder idle in a transaction keeps its locks while doing nothing: its
// row says so, in words (so also without colour).
func TestIdleInTransactionHolderFlagged(t *testing.T) {
	for _, w := range []int{80, 120} {
		hs := newHarness(t, Options{})
		hs.start(w, 30)
		hs.keys("end")
		v := ansi.Strip(hs.view())
		if !hasLine(v, "AGENT 9", "4300", "idle in tx") {
			t.Errorf("%d cells: the idle-in-transaction holder of AGENT 9 is not flagged:\n%s", w, v)
		}
		if hasLine(v, "AGENT 7 ", "4242", "idle in tx") {
			t.Errorf("%d cells: an active holder is flagged", w)
		}
	}
}

// hasLine reports whether one line of screen contains every part.
func hasLine(screen string, parts ...string) bool {
	for _, line := range strings.Split(screen, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// The demo at the common sizes, and its details overlay at the two that
// had it leak, as goldens.
func TestGoldenDemo(t *testing.T) {
	for _, sz := range commonSizes {
		hs := demo(t, sz[0], sz[1])
		for s := 1; s <= 3; s++ {
			hs.send(eventsMsg{events: demoEvents(t0.Add(-time.Duration(s) * time.Second))})
		}
		name := "demo_" + strconv.Itoa(sz[0]) + "x" + strconv.Itoa(sz[1])
		golden(t, name, hs.view())
		if sz[0] <= 120 {
			hs.keys("enter")
			golden(t, name+"_details", hs.view())
		}
	}
}
