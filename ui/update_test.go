package ui

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// msgsOf returns the messages of type T among msgs.
func msgsOf[T any](msgs []tea.Msg) []T {
	var out []T
	for _, m := range msgs {
		if v, ok := m.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

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

func TestSelectionFollowsItsRow(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(100, 30)
	h.keys("o")            // by key: a new key sorts in front
	h.keys("down", "down") // 4300 waiting for AGENT 7
	sel, _ := h.m.table.Selected()
	if sel.PID != 4300 || sel.Granted {
		t.Fatalf("selected %d granted=%v", sel.PID, sel.Granted)
	}
	// A new key sorts in front: the row moves down, the selection with it.
	s := sample()
	front := held(lock("AGENT", 1, 4000, "early", true), time.Second)
	s.Locks = append([]model.Lock{front}, s.Locks...)
	h.send(SnapshotMsg{Snapshot: s})
	sel, _ = h.m.table.Selected()
	if sel.PID != 4300 || sel.Granted || h.m.table.cursor != 3 {
		t.Fatalf("after the shift: selected %d granted=%v at %d", sel.PID, sel.Granted, h.m.table.cursor)
	}
	// The row goes: the cursor stays where it was.
	s.Locks = slices.DeleteFunc(s.Locks, func(l model.Lock) bool { return l.PID == 4300 && !l.Granted })
	h.send(SnapshotMsg{Snapshot: s})
	if h.m.table.cursor != 3 {
		t.Errorf("cursor %d after its row went", h.m.table.cursor)
	}
}

func TestMovement(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(80, 24)
	n := len(sample().Locks)
	h.keys("end")
	if h.m.table.cursor != n-1 {
		t.Errorf("end: %d", h.m.table.cursor)
	}
	h.keys("home")
	if h.m.table.cursor != 0 {
		t.Errorf("home: %d", h.m.table.cursor)
	}
	h.keys("up")
	if h.m.table.cursor != 0 {
		t.Errorf("up at the top: %d", h.m.table.cursor)
	}
	h.keys("pgdown")
	if h.m.table.cursor != min(h.m.table.Page(), n-1) {
		t.Errorf("pgdown: %d", h.m.table.cursor)
	}
	h.keys("j", "k", "G", "g")
	if h.m.table.cursor != 0 {
		t.Errorf("j k G g: %d", h.m.table.cursor)
	}
}

func TestFilterKeys(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(100, 30)
	h.keys("/")
	if !isOpen[*filterInput](h) {
		t.Fatal("/ does not open the filter")
	}
	h.typeText("app:prompt")
	// The table follows as it is typed; q is text here, not quit.
	if h.m.table.shown != 1 {
		t.Fatalf("app:prompt shows %d keys", h.m.table.shown)
	}
	h.keys("enter")
	if isOpen[*filterInput](h) || h.m.table.filter.raw != "app:prompt" {
		t.Fatalf("enter: focused %v, filter %q", isOpen[*filterInput](h), h.m.table.filter.raw)
	}
	if !strings.Contains(ansi.Strip(h.view()), `filter "app:prompt": 1 key`) {
		t.Error("the table title does not say it is filtered")
	}
	// esc in the table clears a kept filter.
	h.keys("esc")
	if !h.m.table.filter.empty() || h.m.table.shown != 5 {
		t.Fatalf("esc: filter %q, %d keys", h.m.table.filter.raw, h.m.table.shown)
	}
	// esc while typing drops the filter.
	h.keys("/")
	h.typeText("4400")
	if h.m.table.shown != 1 {
		t.Fatalf("pid 4400: %d keys", h.m.table.shown)
	}
	h.keys("esc")
	if isOpen[*filterInput](h) || !h.m.table.filter.empty() {
		t.Fatal("esc while typing keeps the filter")
	}
	h.keys("/")
	h.typeText("quit")
	if h.m.table.filter.raw != "quit" {
		t.Fatalf("typing q in the filter: %q", h.m.table.filter.raw)
	}
}

func TestFilterMatching(t *testing.T) {
	s := sample()
	count := func(f string) int {
		fl := parseFilter(f)
		n := 0
		for i := range s.Locks {
			if fl.match(&s.Locks[i]) {
				n++
			}
		}
		return n
	}
	for f, want := range map[string]int{
		"":                       11,
		"agent":                  6,
		"ns:AGENT 9":             2,
		"NS:agent 7":             4,
		"app:REPORT":             3,
		"pid:4300":               2,
		"4300":                   2,
		"pid:x":                  0,
		"idempotency_cleanup":    1,
		"application:hook":       2,
		"5 -3":                   4,
		"no such thing anywhere": 0,
	} {
		if got := count(f); got != want && f != "" {
			t.Errorf("filter %q matches %d rows, want %d", f, got, want)
		}
	}
}

func TestSortCycles(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(100, 30)
	first := func() string {
		l := &h.m.table.locks[h.m.table.rows[0].lock]
		return l.KeyLabel()
	}
	var got []string
	for range 5 {
		h.keys("o")
		got = append(got, first()+" / "+h.m.table.sort.String())
	}
	// Ties keep the key order: AGENT 7 and 5 -3 both queue two. Root
	// blockers: 4242 has three behind it (4300 holds AGENT 9 and waits
	// behind it), 4601 and 4602 two each.
	exp := []string{"AGENT 7 / key", "AGENT 7 / longest wait", "AGENT 7 / longest queue", "IDEMPOTENCY_CLEANUP / longest held", "AGENT 7 / root blockers"}
	if !slices.Equal(got, exp) {
		t.Errorf("sorts: %q, want %q", got, exp)
	}
	// Groups stay whole: holders first, waiters in queue order.
	h.keys("o", "o") // longest wait
	var prevKey model.KeyID
	pos := 0
	for _, r := range h.m.table.rows {
		l := &h.m.table.locks[r.lock]
		if l.KeyID() != prevKey {
			prevKey, pos = l.KeyID(), 0
			if !l.Granted {
				t.Fatalf("group %s starts with a waiter", l.KeyLabel())
			}
		}
		if !l.Granted {
			pos++
			if l.QueuePos != pos {
				t.Fatalf("%s: waiter #%d at place %d", l.KeyLabel(), l.QueuePos, pos)
			}
		}
	}
}

func TestDetailsAndHelpOverlays(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(100, 30)
	h.keys("enter")
	if !isOpen[*details](h) || !strings.Contains(ansi.Strip(h.view()), "Blocking chain") {
		t.Fatal("enter does not open the details")
	}
	h.keys("esc")
	if isOpen[*details](h) {
		t.Fatal("esc does not close the details")
	}
	h.keys("?")
	v := ansi.Strip(h.view())
	if !isOpen[*helpOverlay](h) || !strings.Contains(v, "refresh faster") || !strings.Contains(v, "pause/resume") {
		t.Fatalf("? does not show the full help:\n%s", v)
	}
	// Simulator keys and terminate are not offered here.
	if strings.Contains(v, "scenario") || strings.Contains(v, "terminate") {
		t.Errorf("help offers keys that do nothing here:\n%s", v)
	}
	h.keys("?")
	if isOpen[*helpOverlay](h) {
		t.Fatal("? does not close the help")
	}
	// q quits from an overlay too.
	h.keys("?")
	if cmd := h.send(press("q")); cmd == nil {
		t.Fatal("q in the help does not quit")
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("q in the help does not quit")
	}
}

func TestQuitKeys(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		h := newHarness(t, Options{})
		h.start(80, 24)
		cmd := h.send(press(k))
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Errorf("%s does not quit", k)
		}
	}
	// ctrl+c quits even while typing a filter.
	h := newHarness(t, Options{})
	h.start(80, 24)
	h.keys("/")
	if cmd := h.send(press("ctrl+c")); cmd == nil {
		t.Fatal("ctrl+c in the filter does not quit")
	} else if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("ctrl+c in the filter does not quit")
	}
}

func TestTerminateNeedsTheFlagAndConfirmation(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(80, 24)
	h.keys("T")
	if isOpen[*confirm](h) || !strings.Contains(h.m.footer.status, "--allow-terminate") {
		t.Fatalf("without the flag: confirm %v, status %q", isOpen[*confirm](h), h.m.footer.status)
	}

	var killed atomic.Int32
	h = newHarness(t, Options{Terminate: func(ctx context.Context, pid int32) error {
		killed.Store(pid)
		return nil
	}})
	h.start(80, 24)
	h.keys("down", "T")
	if !isOpen[*confirm](h) || !strings.Contains(ansi.Strip(h.view()), "Terminate backend 4250") {
		t.Fatalf("no confirmation:\n%s", ansi.Strip(h.view()))
	}
	h.keys("n")
	if isOpen[*confirm](h) || killed.Load() != 0 {
		t.Fatal("n did not cancel")
	}
	h.keys("T", "x", "enter") // anything but y leaves it open and does nothing
	if !isOpen[*confirm](h) || killed.Load() != 0 {
		t.Fatal("a key other than y or n answered the question")
	}
	h.keys("y")
	if killed.Load() != 4250 {
		t.Fatalf("terminated %d, want 4250", killed.Load())
	}
	if !strings.Contains(ansi.Strip(h.view()), "terminated backend 4250") {
		t.Error("the event log does not record the termination")
	}

	// A failure is shown, one line.
	h = newHarness(t, Options{Terminate: func(context.Context, int32) error {
		return errors.New("permission denied to terminate process\nDETAIL: only superusers")
	}})
	h.start(80, 24)
	h.keys("T", "y")
	if !h.m.footer.isErr || strings.Contains(h.m.footer.status, "\n") || !strings.Contains(h.m.footer.status, "permission denied") {
		t.Errorf("status %q (error %v)", h.m.footer.status, h.m.footer.isErr)
	}
	// A failure says it failed, in the status and in the event log, and
	// never reads as "terminated".
	if st := h.m.footer.status; strings.Contains(st, "terminated") || !strings.Contains(st, "could not terminate backend") {
		t.Errorf("the status of a failed terminate reads %q", st)
	}
	screen := ansi.Strip(h.view())
	if !strings.Contains(screen, "could not terminate backend") || strings.Contains(screen, "terminated backend") {
		t.Errorf("the event log does not record the failed terminate:\n%s", screen)
	}
}

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

// Two presses of l before the screen shows the first one's effect: the
// locks end as they were, whichever of the two commands runs first.
func TestLocksKeyToggles(t *testing.T) {
	sim := &fakeSim{status: simStatus()}
	h := newHarness(t, Options{Simulator: sim})
	h.start(100, 30)
	first, second := h.send(press("l")), h.send(press("l"))
	h.run(second)
	h.run(first)
	if !sim.Status().LocksEnabled {
		t.Errorf("locks off after two presses; calls %q", sim.Calls())
	}
}

// + and - say how many rates they changed, and that there was nothing to
// change when every rate is without a limit.
func TestRatesKeysSayWhatChanged(t *testing.T) {
	st := simStatus()
	st.Rates = []model.Rate{{Name: "hooks/s", Value: 0}, {Name: "reaper/s", Value: 2}}
	sim := &fakeSim{status: st}
	h := newHarness(t, Options{Simulator: sim})
	h.start(100, 30)
	h.keys("+")
	if h.m.footer.isErr || h.m.footer.status != "rates ×1.25 (1 rate)" {
		t.Errorf("status %q (error %v)", h.m.footer.status, h.m.footer.isErr)
	}
	if !strings.Contains(ansi.Strip(h.view()), "hooks/s max") {
		t.Error("a rate without a limit is not shown as max")
	}
	sim.mu.Lock()
	sim.status.Rates = sim.status.Rates[:1]
	sim.mu.Unlock()
	h.keys("-")
	if !h.m.footer.isErr || !strings.Contains(h.m.footer.status, "no rate to scale") {
		t.Errorf("status %q (error %v)", h.m.footer.status, h.m.footer.isErr)
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

func TestWaitEventsBatchesAndEnds(t *testing.T) {
	ch := make(chan model.Event, 10)
	for range 3 {
		ch <- model.Event{Worker: "hook"}
	}
	close(ch)
	msg := waitEvents(context.Background(), ch)().(eventsMsg)
	if len(msg.events) != 3 || !msg.closed {
		t.Fatalf("got %d events, closed %v", len(msg.events), msg.closed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if msg := waitEvents(ctx, make(chan model.Event))(); msg != nil {
		t.Fatalf("a cancelled wait returned %v", msg)
	}
	// A stream that ended is not waited on again.
	sim := &fakeSim{status: simStatus(), events: make(chan model.Event)}
	h := newHarness(t, Options{Simulator: sim})
	if cmd := h.send(eventsMsg{closed: true}); cmd != nil {
		t.Error("waiting again on a closed stream")
	}
}

func TestDiffEvents(t *testing.T) {
	prev := sample()
	next := sample()
	next.Taken = t0.Add(time.Second)
	// 4250 was granted AGENT 7 after 4242 let go; 4603 left the queue; a new waiter came.
	next.Locks = slices.DeleteFunc(next.Locks, func(l model.Lock) bool {
		return l.PID == 4242 || (l.PID == 4250) || l.PID == 4603
	})
	granted := held(lock("AGENT", 7, 4250, "hook.stop", true), 0)
	next.Locks = append(next.Locks, granted, waiting(lock("AGENT", 11, 4700, "hook.new", false), 1, 0, 4800))
	got := map[string]model.Event{}
	for _, e := range diffEvents(&prev, &next) {
		got[string(e.Outcome)+" "+e.Key+" "+itoa(int64(e.PID))] = e
	}
	for _, k := range []string{"released AGENT 7 4242", "granted AGENT 7 4250", "left 5 -3 4603", "waits AGENT 11 4700"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %q in %v", k, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d events, want 4: %v", len(got), got)
	}
	if e := got["granted AGENT 7 4250"]; e.Wait != 7*time.Second {
		t.Errorf("granted after %v, want 7s (6s waited + 1s)", e.Wait)
	}
	// A hot key with a long queue: the holder goes, the first waiter gets it.
	var hot, hot2 model.Snapshot
	hot.Locks = append(hot.Locks, held(lock("AGENT", 1, 100, "x", true), time.Second))
	for i := range 200 {
		hot.Locks = append(hot.Locks, waiting(lock("AGENT", 1, int32(200+i), "x", false), i+1, time.Second, 100))
	}
	hot2.Locks = append(hot2.Locks, held(lock("AGENT", 1, 200, "x", true), 0))
	hot2.Locks = append(hot2.Locks, hot.Locks[2:]...)
	evs := diffEvents(&hot, &hot2)
	if len(evs) != 2 || evs[0].Outcome != outcomeGranted || evs[0].PID != 200 || evs[1].Outcome != outcomeReleased || evs[1].PID != 100 {
		t.Errorf("hot key: %+v", evs)
	}

	// Redis keys (entity id 0 all) that keep their place up to a change
	// in the middle: only the changed rows make events.
	redis := func(name, owner string, granted bool) model.Lock {
		l := model.Lock{Kind: model.KindRedis, Name: name, Owner: owner, Mode: "exclusive", Granted: granted}
		if !granted {
			l.QueuePos, l.BlockedByOwners = 1, []string{"o-" + name}
		}
		return l
	}
	var rs, rs2 model.Snapshot
	for i := range 50 {
		k := "k" + itoa(int64(i))
		rs.Locks = append(rs.Locks, redis(k, "o-"+k, true))
		rs2.Locks = append(rs2.Locks, redis(k, "o-"+k, true))
		if i == 25 {
			rs2.Locks[len(rs2.Locks)-1].Owner = "someone"
		}
		if i == 40 {
			rs2.Locks = append(rs2.Locks, redis(k, "w", false))
		}
	}
	got = map[string]model.Event{}
	for _, e := range diffEvents(&rs, &rs2) {
		got[string(e.Outcome)+" "+e.Key+" "+e.Worker] = e
	}
	if len(got) != 3 || got["acquired k25 someone"].Key == "" || got["released k25 o-k25"].Key == "" || got["waits k40 w"].Key == "" {
		t.Errorf("Redis keys: %v", got)
	}

	// A flood is capped with a summary line.
	var big model.Snapshot
	for i := range 100 {
		big.Locks = append(big.Locks, held(lock("AGENT", int64(i), int32(5000+i), "x", true), 0))
	}
	evs = diffEvents(&model.Snapshot{}, &big)
	if len(evs) != maxDiffEvents+1 || !strings.Contains(evs[maxDiffEvents].Detail, "80 more") {
		t.Errorf("%d events, last %+v", len(evs), evs[len(evs)-1])
	}
}

func TestBlockingChain(t *testing.T) {
	s := sample()
	var sel *model.Lock
	for i := range s.Locks {
		if s.Locks[i].PID == 4251 {
			sel = &s.Locks[i]
		}
	}
	chain := strings.Join(blockingChain(&s, sel), "\n")
	for _, want := range []string{"4251 waits for AGENT 9", "held by 4300", "4300 waits for AGENT 7", "held by 4242"} {
		if !strings.Contains(chain, want) {
			t.Errorf("chain lacks %q:\n%s", want, chain)
		}
	}
	// A holder: whom it blocks, then what it waits for itself.
	chain = strings.Join(blockingChain(&s, &s.Locks[3]), "\n") // 4300 holds AGENT 9
	if !strings.Contains(chain, "blocks 1: 4251") || !strings.Contains(chain, "itself waits") {
		t.Errorf("holder chain:\n%s", chain)
	}
	// The share waiter is queued behind the exclusive waiter, not a holder.
	chain = strings.Join(blockingChain(&s, &s.Locks[8]), "\n")
	if !strings.Contains(chain, "queued behind 4603") {
		t.Errorf("share waiter chain:\n%s", chain)
	}
	// A cycle ends the walk and says what it is.
	a := held(lock("AGENT", 1, 1, "a", true), time.Second)
	b := held(lock("AGENT", 2, 2, "b", true), time.Second)
	aw := waiting(lock("AGENT", 2, 1, "a", false), 1, time.Second, 2)
	bw := waiting(lock("AGENT", 1, 2, "b", false), 1, time.Second, 1)
	cyc := model.Snapshot{Locks: []model.Lock{a, bw, b, aw}}
	chain = strings.Join(blockingChain(&cyc, &cyc.Locks[3]), "\n")
	if !strings.Contains(chain, "deadlock") {
		t.Errorf("cycle:\n%s", chain)
	}
}

func TestResizeAnytime(t *testing.T) {
	h := newHarness(t, Options{Simulator: &fakeSim{status: simStatus()}})
	h.start(120, 40)
	h.keys("down", "enter")
	for _, sz := range [][2]int{{0, 0}, {1, 1}, {79, 24}, {80, 23}, {20, 200}, {300, 10}, {80, 24}, {200, 60}} {
		h.send(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		v := h.view()
		if sz[0] >= MinWidth && sz[1] >= MinHeight {
			checkFrame(t, v, sz[0], sz[1])
		} else if sz[0] > 0 && !strings.Contains(ansi.Strip(v), "at least 80×24") && sz[0] >= 40 {
			t.Errorf("%v: no too-small message:\n%s", sz, ansi.Strip(v))
		}
	}
	// The details overlay survived the resizes and still closes.
	h.keys("esc")
	if isOpen[*details](h) {
		t.Error("details stuck open after resizing")
	}
}

func TestTooSmallStillQuits(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(40, 10)
	cmd := h.send(press("q"))
	if cmd == nil {
		t.Fatal("q does nothing on a small screen")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Fatal("q does not quit on a small screen")
	}
}

func TestHeaderShowsPrivilegeWarning(t *testing.T) {
	inf := info
	inf.Warning = `role "plain" lacks pg_monitor: other roles' queries are hidden`
	h := newHarness(t, Options{Source: &fakeSource{info: inf}})
	h.start(100, 30)
	if !strings.Contains(ansi.Strip(h.view()), "lacks pg_monitor") {
		t.Error("no privilege warning on screen")
	}
}

func TestViewIsAltScreen(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(80, 24)
	v := h.m.View()
	if !v.AltScreen || !strings.Contains(v.WindowTitle, "monitor@app") {
		t.Errorf("view: alt %v, title %q", v.AltScreen, v.WindowTitle)
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
