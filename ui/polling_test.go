package ui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

func TestPollingLoopRearmsOneTick(t *testing.T) {
	h := newHarness(t, Options{Interval: 2 * time.Second})
	h.start(100, 30)
	if h.src.polls != 1 || h.feed().phase != phaseWaiting || !slices.Equal(h.armed, []time.Duration{2 * time.Second}) {
		t.Fatalf("after the first poll: polls %d, phase %d, armed %v", h.src.polls, h.feed().phase, h.armed)
	}
	// The tick polls; the poll's answer arms the next tick.
	msgs := h.step(h.tick())
	if len(msgsOf[SnapshotMsg](msgs)) != 1 || h.src.polls != 2 || len(h.armed) != 2 {
		t.Fatalf("tick: %d snapshots, %d polls, armed %v", len(msgsOf[SnapshotMsg](msgs)), h.src.polls, h.armed)
	}

	// Faster: the pending tick is replaced; the old one is ignored.
	old := h.feed().seq
	h.keys(">")
	if h.m.poll.interval != time.Second || h.armed[len(h.armed)-1] != time.Second {
		t.Fatalf("faster: interval %v, armed %v", h.m.poll.interval, h.armed)
	}
	if cmd := h.send(tickMsg{seq: old}); cmd != nil {
		t.Fatal("a stale tick started a poll")
	}
	if h.src.polls != 2 {
		t.Fatalf("polls %d after a stale tick", h.src.polls)
	}
	h.keys("<", "<")
	if h.m.poll.interval != 5*time.Second {
		t.Errorf("slower twice from 1s: %v", h.m.poll.interval)
	}
	if !strings.Contains(ansi.Strip(h.view()), "every 5s") {
		t.Error("the header does not show the new interval")
	}

	// Refresh now: polls at once and invalidates the armed tick.
	stale := h.feed().seq
	h.keys("r")
	if h.src.polls != 3 {
		t.Fatalf("refresh now: polls %d", h.src.polls)
	}
	if cmd := h.send(tickMsg{seq: stale}); cmd != nil {
		t.Fatal("the tick armed before a forced refresh still polled")
	}
}

func TestNextInterval(t *testing.T) {
	for _, tc := range []struct {
		cur  time.Duration
		dir  int
		want time.Duration
	}{
		{time.Second, -1, 500 * time.Millisecond},
		{time.Second, 1, 2 * time.Second},
		{100 * time.Millisecond, -1, 100 * time.Millisecond},
		{30 * time.Second, 1, 30 * time.Second},
		{3 * time.Second, -1, 2 * time.Second},
		{3 * time.Second, 1, 5 * time.Second},
	} {
		if got := nextInterval(tc.cur, tc.dir); got != tc.want {
			t.Errorf("nextInterval(%v, %d) = %v, want %v", tc.cur, tc.dir, got, tc.want)
		}
	}
}

func TestPauseHoldsTheScreen(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(100, 30)
	h.keys("space")
	if !h.m.poll.paused || !strings.Contains(ansi.Strip(h.view()), "PAUSED") {
		t.Fatal("not paused")
	}
	// The armed tick finds the dashboard paused: no poll, the loop stops.
	if cmd := h.send(h.tick()); cmd != nil || h.feed().phase != phaseIdle {
		t.Fatalf("a tick while paused: cmd %v, phase %d", cmd != nil, h.feed().phase)
	}
	// A poll answered while paused (one in flight at the press) is not shown.
	changed := sample()
	changed.Locks = changed.Locks[:1]
	h.send(SnapshotMsg{Snapshot: changed})
	if got := len(h.m.table.rows); got != len(sample().Locks) {
		t.Fatalf("a snapshot changed the paused table: %d rows", got)
	}
	// r refreshes once, even paused, and does not restart the loop.
	h.src.results = []SnapshotMsg{{Snapshot: changed}}
	h.keys("r")
	if got := len(h.m.table.rows); got != 1 || h.feed().phase != phaseIdle || !h.m.poll.paused {
		t.Fatalf("refresh while paused: %d rows, phase %d, paused %v", got, h.feed().phase, h.m.poll.paused)
	}
	// Resuming polls at once and restarts the loop.
	polls := h.src.polls
	h.keys("space")
	if h.m.poll.paused || h.src.polls != polls+1 || h.feed().phase != phaseWaiting {
		t.Fatalf("resume: paused %v, polls %d (was %d), phase %d", h.m.poll.paused, h.src.polls, polls, h.feed().phase)
	}
}

func TestReconnectWithBackoff(t *testing.T) {
	src := &fakeSource{info: info, results: []SnapshotMsg{
		{Snapshot: sample()}, {Err: errLost}, {Err: errLost}, {Err: errLost}, {Snapshot: sample()},
	}}
	h := newHarness(t, Options{Source: src})
	h.start(80, 24)
	for i := 0; i < 3; i++ {
		h.step(h.tick())
	}
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second}
	if !slices.Equal(h.armed, want) {
		t.Fatalf("armed %v, want %v (interval, then backoff)", h.armed, want)
	}
	v := ansi.Strip(h.view())
	if !strings.Contains(v, "no connection · retry 3 in 4s") || !strings.Contains(v, "AGENT 7") {
		t.Fatalf("no banner, or the last snapshot is gone:\n%s", v)
	}
	if n := len(h.notes()); n != 1 {
		t.Errorf("%d event lines for one outage, want 1", n)
	}
	h.step(h.tick())
	v = ansi.Strip(h.view())
	if strings.Contains(v, "no connection") || h.feed().conn != connOK || h.feed().failures != 0 {
		t.Fatalf("still lost after a good poll:\n%s", v)
	}
	if !strings.Contains(v, "reconnected after 3 failed attempts") {
		t.Errorf("no reconnect line in the event log:\n%s", v)
	}
	if got := h.armed[len(h.armed)-1]; got != time.Second {
		t.Errorf("after reconnecting the interval is %v", got)
	}
}

func TestBackoff(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

// Two sources armed at their own answers, a few milliseconds apart, tick
// at the same instant; each still polls about every interval.
func TestOnGridAlignsTheSourcesTicks(t *testing.T) {
	sec := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		d    time.Duration
		want time.Time
	}{
		{sec.Add(2 * time.Millisecond), time.Second, sec.Add(time.Second)},
		{sec.Add(11 * time.Millisecond), time.Second, sec.Add(time.Second)},
		{sec.Add(600 * time.Millisecond), time.Second, sec.Add(2 * time.Second)}, // never sooner than d/2
		{sec.Add(500 * time.Millisecond), time.Second, sec.Add(time.Second)},
		{sec.Add(30 * time.Millisecond), 200 * time.Millisecond, sec.Add(200 * time.Millisecond)},
		{sec.Add(3 * time.Millisecond), 0, sec.Add(3 * time.Millisecond)},
	} {
		if got := c.now.Add(onGrid(c.now, c.d)); !got.Equal(c.want) {
			t.Errorf("onGrid(%s, %v) ticks at %s, want %s", c.now.Format("05.000"), c.d, got.Format("05.000"), c.want.Format("05.000"))
		}
	}
}

// While a lock is waited for, the loop polls at the fast interval, and
// the header says so; at rest it goes back to the interval.
func TestPollingFasterWhileWaiting(t *testing.T) {
	waiting := model.Snapshot{Taken: t0, Locks: []model.Lock{
		{Kind: model.KindAdvisory, PID: 1, Granted: true, Mode: model.ModeExclusive, EntityID: 5, Pair: true},
		{Kind: model.KindAdvisory, PID: 2, Granted: false, Mode: model.ModeExclusive, EntityID: 5, Pair: true, BlockedBy: []int32{1}},
	}}
	rest := model.Snapshot{Taken: t0.Add(time.Second), Locks: waiting.Locks[:1]}
	src := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: rest}, {Snapshot: waiting}, {Snapshot: waiting}, {Snapshot: rest}}}
	h := newHarness(t, Options{Source: src, Interval: 2 * time.Second, FastInterval: 200 * time.Millisecond})
	h.start(100, 30)
	h.step(h.tick())
	if !strings.Contains(ansi.Strip(h.view()), "every 200ms (waits)") {
		t.Errorf("the header does not say the loop polls faster:\n%s", ansi.Strip(h.view()))
	}
	h.step(h.tick())
	h.step(h.tick())
	want := []time.Duration{2 * time.Second, 200 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second}
	if !slices.Equal(h.armed, want) {
		t.Fatalf("armed %v, want %v", h.armed, want)
	}
	if !strings.Contains(ansi.Strip(h.view()), "every 2s") {
		t.Error("the header does not show the interval at rest")
	}
}
