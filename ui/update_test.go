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
