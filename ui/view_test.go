package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// Components alone, at fixed sizes.

func TestGoldenHeader(t *testing.T) {
	st := DefaultStyles()
	k := DefaultKeyMap()
	p := newPoller(context.Background(), time.Second, []*feed{{name: "PostgreSQL", conn: connOK, latency: 3 * time.Millisecond, taken: t0}})
	opts := Options{}
	h := header{st: &st, keys: &k, poll: &p, width: 80, info: info, mode: opts.mode()}
	golden(t, "header_80", h.View())
	h.width = 120
	golden(t, "header_120", h.View())
	h.server = "monitor@db-prod-eu-west-1.example.com:5432/app"
	golden(t, "header_server_120", h.View())
	h.width = 80
	golden(t, "header_server_80", h.View())

	p.paused = true
	f := p.feeds[0]
	f.conn, f.lastErr, f.failures, f.retryIn = connLost, errLost.Error(), 3, 4*time.Second
	h.info.Warning = `role "monitor" lacks pg_monitor: other roles' queries, application names and states are hidden (GRANT pg_monitor TO monitor)`
	golden(t, "header_lost_80", h.View())
	if h.Height() != 4 {
		t.Errorf("height with a banner and a warning on two lines: %d", h.Height())
	}
}

func TestGoldenGauges(t *testing.T) {
	st := DefaultStyles()
	snap := sample()
	g := gauges{st: &st, width: 80, maxConns: 100}
	g.held, g.waiting = 6, 5
	g.SetSnapshot(&snap)
	for _, r := range []int{0, 3, 10, 4} {
		g.SetSnapshot(&model.Snapshot{Connections: 57, Interval: time.Second, NewWaits: r})
	}
	golden(t, "gauges_80_monitor", g.View())
	g.pools = simStatus().Pools
	golden(t, "gauges_80_pools", g.View())
	g.width = 160
	golden(t, "gauges_160_pools", g.View())
	if g.Height() != 1 {
		t.Errorf("four gauges at 160 take %d lines, want 1", g.Height())
	}
}

func newTable(w, h int) *lockTable {
	st := DefaultStyles()
	k := DefaultKeyMap()
	t := newLockTable(&st, &k)
	t.db = "app"
	t.SetSize(w, h)
	s := sample()
	t.SetLocks(s.Locks, s.Taken)
	return &t
}

func TestGoldenLockTable(t *testing.T) {
	golden(t, "table_80x16", newTable(80, 16).View())
	golden(t, "table_140x16", newTable(140, 16).View())

	small := newTable(80, 8)
	small.MoveTo(8) // past the window: it scrolls
	golden(t, "table_80x8_scrolled", small.View())

	sorted := newTable(80, 16)
	sorted.CycleSort() // longest wait
	golden(t, "table_80x16_sort_wait", sorted.View())

	filtered := newTable(80, 16)
	filtered.SetFilter("app:reaper")
	golden(t, "table_80x16_filter_app", filtered.View())
	filtered.SetFilter("pid:nothing")
	golden(t, "table_80x16_filter_none", filtered.View())

	empty := newTable(80, 6)
	empty.SetLocks(nil, t0)
	golden(t, "table_80x6_empty", empty.View())
}

func TestGoldenSimPanel(t *testing.T) {
	st := DefaultStyles()
	k := DefaultKeyMap()
	p := simPanel{st: &st, keys: &k}
	for _, v := range []float64{100, 150, 180, 212, 90, 240, 212} {
		s := simStatus()
		s.Throughput = v
		p.SetStatus(s, t0)
	}
	p.SetSize(60, p.Height())
	golden(t, "simpanel_60_full", p.View())
	p.SetSize(80, 7)
	golden(t, "simpanel_80x7_cut", p.View())

	bad := simStatus()
	bad.LocksEnabled = false
	bad.Invariants[0] = model.Invariant{Name: "no overlap", Violations: 3, Last: "agent 7: two critical sections overlapped\n(hook 4250, reaper 4300)"}
	bad.Invariants[2].Violations = 1
	p.SetStatus(bad, t0)
	p.SetSize(80, 12)
	golden(t, "simpanel_80x12_broken", p.View())
}

func TestGoldenEventLog(t *testing.T) {
	st := DefaultStyles()
	e := eventLog{st: &st}
	e.SetSize(80, 7)
	golden(t, "events_80x7_empty", e.View())
	e.Add(
		model.Event{Time: t0, Worker: "hook", Outcome: model.OutcomeAcquired, Key: "AGENT 7", Wait: 1200 * time.Millisecond, PID: 4250},
		model.Event{Time: t0, Worker: "reaper", Outcome: model.OutcomeSkipped, Key: "AGENT 9", PID: 4300},
		model.Event{Time: t0, Worker: "stop", Outcome: model.OutcomeTimeout, Key: "AGENT 7", Wait: 15 * time.Second},
		model.Event{Time: t0, Worker: "hook", Outcome: model.OutcomeReentrant, Key: "AGENT 3", Detail: "nested acquire refused"},
		model.Event{Time: t0, Worker: "hook", Outcome: model.OutcomePhantom, Key: "AGENT 5", Detail: "unlock after a failed wait returned true"},
		model.Event{Time: t0, Worker: "sim", Outcome: model.OutcomeViolation, Detail: "no overlap: agent 7"},
		model.Event{Time: t0, Worker: "locktop", Outcome: outcomeInfo, Detail: "scenario burst"},
	)
	golden(t, "events_80x7", e.View())
}

// Whole screens.

func TestGoldenScreens(t *testing.T) {
	monitor := func(w, h int) *harness {
		hs := newHarness(t, Options{})
		hs.start(w, h)
		return hs
	}
	withSim := func(w, h int) *harness {
		sim := &fakeSim{status: simStatus()}
		hs := newHarness(t, Options{Simulator: sim, ThrowAway: true})
		hs.start(w, h)
		return hs
	}

	golden(t, "screen_monitor_80x24", monitor(80, 24).view())
	golden(t, "screen_monitor_120x40", monitor(120, 40).view())
	golden(t, "screen_sim_80x24", withSim(80, 24).view())
	golden(t, "screen_sim_140x40", withSim(140, 40).view())

	hs := monitor(80, 24)
	hs.keys("?")
	golden(t, "screen_help_80x24", hs.view())

	hs = withSim(100, 30)
	hs.keys("?")
	golden(t, "screen_help_sim_100x30", hs.view())

	hs = monitor(100, 30)
	hs.keys("down", "down", "down", "down", "enter") // the waiter behind a holder that waits
	golden(t, "screen_details_100x30", hs.view())

	hs = monitor(80, 24)
	hs.keys("space")
	golden(t, "screen_paused_80x24", hs.view())

	hs = monitor(80, 24)
	hs.keys("/")
	hs.typeText("ns:AGENT 9")
	golden(t, "screen_filter_typing_80x24", hs.view())

	hs = withSim(80, 24)
	hs.keys("s")
	golden(t, "screen_scenario_80x24", hs.view())

	hs = newHarness(t, Options{Terminate: func(context.Context, int32) error { return nil }})
	hs.start(80, 24)
	hs.keys("T")
	golden(t, "screen_confirm_80x24", hs.view())
}

func TestGoldenFooter(t *testing.T) {
	hs := newHarness(t, Options{})
	hs.start(80, 24)
	golden(t, "footer_80", hs.m.footerView())
	hs.keys("o")
	golden(t, "footer_80_status", hs.m.footerView())
	sim := newHarness(t, Options{Simulator: &fakeSim{status: simStatus()}, Terminate: func(context.Context, int32) error { return nil }})
	sim.start(160, 40)
	golden(t, "footer_160_sim", sim.m.footerView())
}

func TestGoldenTooSmall(t *testing.T) {
	hs := newHarness(t, Options{})
	hs.start(60, 20)
	v := hs.view()
	golden(t, "screen_too_small_60x20", v)
	checkFrame(t, v, 60, 20)
}

func TestGoldenLost(t *testing.T) {
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: sample()}, {Err: errLost}}}
	hs := newHarness(t, Options{Source: src})
	hs.start(80, 24)
	hs.step(hs.tick()) // the second poll fails
	golden(t, "screen_lost_80x24", hs.view())
}

// Every size from the minimum up, with each overlay: the frame is always
// exactly the terminal's size, so nothing wraps or scrolls.
func TestFrameFitsEverySize(t *testing.T) {
	sizes := [][2]int{{80, 24}, {81, 25}, {99, 24}, {100, 30}, {119, 33}, {120, 40}, {160, 50}, {250, 70}}
	for _, withSim := range []bool{false, true} {
		opts := Options{}
		if withSim {
			opts.Simulator = &fakeSim{status: simStatus()}
		}
		hs := newHarness(t, opts)
		hs.start(80, 24)
		for _, overlay := range []string{"", "?", "enter", "s"} {
			for _, sz := range sizes {
				hs.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
				if overlay != "" {
					hs.keys(overlay)
				}
				checkFrame(t, hs.view(), sz[0], sz[1])
				if overlay != "" {
					hs.keys("esc")
				}
			}
		}
	}
}

// Without colour (NO_COLOR), long waits are marked in text.
func TestNoColorMarksWaits(t *testing.T) {
	hs := newHarness(t, Options{})
	hs.start(80, 24)
	if strings.Contains(ansi.Strip(hs.view()), "!!") {
		t.Fatal("marks shown with colour on")
	}
	hs.send(tea.ColorProfileMsg{Profile: colorprofile.ASCII})
	hs.keys("end") // the selected row is drawn plain; move it off the waiters
	v := ansi.Strip(hs.view())
	if !strings.Contains(v, "6.0s !!") || !strings.Contains(v, "1.5s !") {
		t.Errorf("no severity marks without colour:\n%s", v)
	}
}

// Strings from the server reach the screen without their control
// characters: an ESC or a BEL in a user, database, application name or
// query cannot start the terminal's own sequences or break the frame.
func TestServerStringsAreSanitized(t *testing.T) {
	nasty := []string{"evil\x1b]0;pwned\x07", "db\x1b[2J\x1b[H", "\u202eRTL\u202c", "tab\there\nnew\r\nline", "\x00\x08\x7f\u0085\u009b31m"}
	snap := sample()
	for i := range snap.Locks {
		l := &snap.Locks[i]
		l.OwnBackend().User = nasty[i%len(nasty)]
		l.Database = nasty[(i+1)%len(nasty)]
		l.OwnBackend().ApplicationName = nasty[(i+2)%len(nasty)]
		l.OwnBackend().Query = nasty[(i+3)%len(nasty)]
		l.OwnBackend().State = nasty[(i+4)%len(nasty)]
	}
	st := simStatus()
	st.Scenario = nasty[0]
	st.Invariants[1].Violations, st.Invariants[1].Last = 2, nasty[1]
	srv := info
	srv.User, srv.Database, srv.Warning = nasty[0], nasty[1], nasty[4]
	ev := model.Event{Time: t0, Worker: nasty[2], Outcome: model.OutcomeError, Key: nasty[3], Detail: nasty[0]}
	for _, w := range []int{80, 140} {
		h := newHarness(t, Options{Simulator: &fakeSim{status: st},
			Source:    &fakeSource{info: srv, results: []SnapshotMsg{{Snapshot: snap}}},
			Terminate: func(context.Context, int32) error { return nil }})
		h.start(w, 40)
		h.send(eventsMsg{events: []model.Event{ev}})
		for _, k := range []string{"", "enter", "T"} {
			if k != "" {
				h.keys(k)
			}
			v := h.view()
			checkFrame(t, v, w, 40)
			for _, bad := range []string{"\x1b]0;", "\x1b[2J", "\x07", "\u202e", "\x00", "\x08", "\u009b"} {
				if strings.Contains(v, bad) {
					t.Errorf("%d cells, %q: the screen carries %q", w, k, bad)
				}
			}
			h.keys("esc")
		}
		if title := h.m.View().WindowTitle; strings.ContainsAny(title, "\x1b\x07") {
			t.Errorf("window title %q", title)
		}
	}
}
