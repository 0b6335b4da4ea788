package ui

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"go.uber.org/goleak"

	"github.com/locktop/locktop/model"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// t0 is the fixed clock of every test: goldens never depend on the time
// they run.
var t0 = time.Date(2026, 3, 14, 15, 4, 5, 0, time.UTC)

// golden compares a view, ANSI stripped, with testdata/name.golden.
func golden(t *testing.T, name, view string) {
	t.Helper()
	got := ansi.Strip(view)
	if !strings.HasSuffix(got, "\n") {
		got += "\n"
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ui -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (rerun with -update if the change is meant):\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// checkFrame fails unless view is exactly w cells wide and h lines tall.
func checkFrame(t *testing.T, view string, w, h int) {
	t.Helper()
	lines := strings.Split(view, "\n")
	if len(lines) != h {
		t.Errorf("%dx%d: %d lines", w, h, len(lines))
	}
	for i, l := range lines {
		if lw := ansi.StringWidth(l); lw != w {
			t.Errorf("%dx%d: line %d is %d cells wide: %q", w, h, i, lw, ansi.Strip(l))
			return
		}
	}
}

// lock builds a row of the sample snapshot.
func lock(ns string, id int64, pid int32, app string, granted bool) model.Lock {
	l := model.Lock{
		Kind: model.KindAdvisory, PID: pid, Database: "app", Backend: &model.Backend{User: "app_rw", ApplicationName: app, State: "active", QueryStart: t0.Add(-30 * time.Second)},
		Mode: model.ModeExclusive, Granted: granted, Namespace: ns, EntityID: id, Pair: true,
	}
	if granted {
		l.OwnBackend().Query = "SELECT pg_advisory_lock(1, " + itoa(id) + ")"
	} else {
		l.OwnBackend().Query = "SELECT pg_advisory_lock(1, " + itoa(id) + ") /* waiting */"
	}
	return l
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func held(l model.Lock, d time.Duration) model.Lock {
	l.HeldSince = t0.Add(-d)
	return l
}

func waiting(l model.Lock, pos int, d time.Duration, by ...int32) model.Lock {
	l.QueuePos, l.WaitStart, l.BlockedBy = pos, t0.Add(-d), by
	return l
}

// sample is a snapshot with every shape the table draws: a queue of two
// (one waiter past the warning, one past the critical threshold), a chain
// (a holder that itself waits), shared holders with an exclusive waiter and
// a share waiter behind it, a fixed one-bigint key, an unregistered pair,
// and a key in another database.
func sample() model.Snapshot {
	idle := held(lock("AGENT", 9, 4300, "worker.reaper", true), 90*time.Second)
	ib := idle.OwnBackend()
	ib.State, ib.Query = "idle in transaction", "UPDATE agents SET state = 'stopping'\n  WHERE id = 9"
	fixed := held(lock("IDEMPOTENCY_CLEANUP", 42424242, 4400, "idempotency", true), 12*time.Minute)
	fixed.Pair = false
	other := held(lock("AGENT", 7, 4500, "billing", true), 3*time.Second)
	other.Database = "billing"
	shareA := held(lock("5", -3, 4601, "report", true), 2*time.Second)
	shareA.Mode = model.ModeShare
	shareB := held(lock("5", -3, 4602, "report", true), time.Second)
	shareB.Mode = model.ModeShare
	shareW := waiting(lock("5", -3, 4604, "report", false), 2, 300*time.Millisecond, 4603)
	shareW.Mode = model.ModeShare
	locks := []model.Lock{
		held(lock("AGENT", 7, 4242, "locktop.lock", true), 12*time.Second),
		waiting(lock("AGENT", 7, 4250, "hook.stop", false), 1, 6*time.Second, 4242),
		waiting(lock("AGENT", 7, 4300, "worker.reaper", false), 2, 1500*time.Millisecond, 4242),
		idle,
		waiting(lock("AGENT", 9, 4251, "hook.prompt", false), 1, 200*time.Millisecond, 4300),
		shareA, shareB,
		waiting(lock("5", -3, 4603, "migrate", false), 1, 800*time.Millisecond, 4601, 4602),
		shareW,
		fixed,
		other,
	}
	return model.Snapshot{Taken: t0, Locks: locks, Connections: 57, Latency: 3 * time.Millisecond, Interval: time.Second, NewWaits: 3}
}

var info = model.ServerInfo{Version: "16.4 (Debian 16.4-1)", Database: "app", User: "monitor", MaxConnections: 100, Privileged: true}

// fakeSource answers polls from a queue of results; the last one repeats.
type fakeSource struct {
	mu      sync.Mutex
	results []SnapshotMsg
	polls   int
	info    model.ServerInfo
}

func (f *fakeSource) Poll(ctx context.Context) (model.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	if len(f.results) == 0 {
		return model.Snapshot{Taken: t0}, nil
	}
	r := f.results[0]
	if len(f.results) > 1 {
		f.results = f.results[1:]
	}
	return r.Snapshot, r.Err
}

func (f *fakeSource) Info() model.ServerInfo { return f.info }

// fakeSim records what the dashboard asks of it.
type fakeSim struct {
	mu       sync.Mutex
	status   model.SimStatus
	calls    []string
	events   chan model.Event
	failNext error
	faults   []string // the running scenario's faults, when set
}

func (f *fakeSim) record(s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
	err := f.failNext
	f.failNext = nil
	return err
}

func (f *fakeSim) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeSim) Status() model.SimStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}
func (f *fakeSim) Scenarios() []string { return []string{"steady", "burst", "pool-exhaustion"} }
func (f *fakeSim) SetScenario(name string) error {
	return f.record("scenario " + name)
}

// ScaleRates scales the status's rates that have a limit, as the
// simulator does.
func (f *fakeSim) ScaleRates(factor float64) int {
	_ = f.record("rates " + ansi.Strip(fmtRate(factor)))
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i := range f.status.Rates {
		if f.status.Rates[i].Value > 0 {
			f.status.Rates[i].Value *= factor
			n++
		}
	}
	return n
}
func (f *fakeSim) ScaleWorkers(factor float64) int {
	_ = f.record("workers " + ansi.Strip(fmtRate(factor)))
	return 42
}

// ToggleLocks flips the status's locks, as the simulator does.
func (f *fakeSim) ToggleLocks() bool {
	f.mu.Lock()
	f.status.LocksEnabled = !f.status.LocksEnabled
	on := f.status.LocksEnabled
	f.mu.Unlock()
	if on {
		_ = f.record("locks on")
	} else {
		_ = f.record("locks off")
	}
	return on
}
func (f *fakeSim) Faults() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.faults != nil {
		return f.faults
	}
	return []string{"kill-holder", "pool-drain"}
}

// DescribeScenario and DescribeFault say what each runs and what to watch.
func (f *fakeSim) DescribeScenario(name string) string {
	return "runs " + name + " · watch the queue on AGENT 1"
}
func (f *fakeSim) DescribeFault(name string) string {
	return "injects " + name + " · watch the event log"
}
func (f *fakeSim) InjectFault(name string) error {
	return f.record("fault " + name)
}
func (f *fakeSim) Events() <-chan model.Event {
	if f.events == nil {
		return nil
	}
	return f.events
}

func simStatus() model.SimStatus {
	return model.SimStatus{
		Scenario: "steady", Running: true, LocksEnabled: true, Agents: 100, Started: t0.Add(-2*time.Minute - 3*time.Second),
		Rates: []model.Rate{{Name: "hooks/s", Value: 200}, {Name: "stops/s", Value: 5}, {Name: "reaper/s", Value: 0.5}},
		Workers: map[string]model.Counters{
			"hook":       {Attempts: 24010, Acquired: 24000, Timeouts: 3, Errors: 0},
			"reaper":     {Attempts: 120, Acquired: 80, Skipped: 40},
			"reconciler": {Attempts: 60, Acquired: 51, Skipped: 9},
			"stop":       {Attempts: 600, Acquired: 598, Timeouts: 1, Reentrant: 1},
			"summariser": {Attempts: 300, Acquired: 150, Skipped: 150},
			"watchdog":   {Attempts: 60, Acquired: 60, Errors: 2},
		},
		Throughput: 212,
		Invariants: []model.Invariant{{Name: "no overlap"}, {Name: "exactly once"}, {Name: "no lost update"}, {Name: "one summary per turn"}},
		Pools: []model.PoolStats{
			{Name: "lock", MaxConns: 20, InUse: 15, Total: 18, Waiting: 2},
			{Name: "work", MaxConns: 20, InUse: 6, Total: 10},
		},
	}
}

// harness drives a Model with messages, on the fixed clock, with ticks
// that are recorded instead of waited for.
type harness struct {
	t     testing.TB
	m     *Model
	src   *fakeSource
	sim   *fakeSim
	armed []time.Duration
}

func newHarness(t testing.TB, opts Options) *harness {
	t.Helper()
	h := &harness{t: t}
	if opts.Source == nil {
		h.src = &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: sample()}}}
		opts.Source = h.src
	} else if fs, ok := opts.Source.(*fakeSource); ok {
		h.src = fs
	}
	if fs, ok := opts.Simulator.(*fakeSim); ok {
		h.sim = fs
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.m = New(ctx, opts)
	h.m.now = func() time.Time { return t0 }
	// Ticks are recorded, never waited for: a test sends tickMsg itself
	// when it wants the time to have passed.
	h.m.poll.after = func(d time.Duration, msg tea.Msg) tea.Cmd {
		h.armed = append(h.armed, d)
		return nil
	}
	return h
}

// send updates the model with msg and returns the command it answered.
func (h *harness) send(msg tea.Msg) tea.Cmd {
	h.t.Helper()
	_, cmd := h.m.Update(msg)
	return cmd
}

// run executes cmd (batches included) and returns the messages it made.
func (h *harness) run(cmd tea.Cmd) []tea.Msg {
	h.t.Helper()
	if cmd == nil {
		return nil
	}
	msg := cmd()
	if batch, ok := msg.(tea.BatchMsg); ok {
		var out []tea.Msg
		for _, c := range batch {
			out = append(out, h.run(c)...)
		}
		return out
	}
	if msg == nil {
		return nil
	}
	return []tea.Msg{msg}
}

// step sends msg, runs what it asks for and feeds the results back, once.
func (h *harness) step(msg tea.Msg) []tea.Msg {
	h.t.Helper()
	msgs := h.run(h.send(msg))
	for _, m := range msgs {
		h.send(m)
	}
	return msgs
}

// start sizes the screen and completes the first poll.
func (h *harness) start(w, hgt int) {
	h.t.Helper()
	h.send(tea.WindowSizeMsg{Width: w, Height: hgt})
	for _, m := range h.run(h.m.Init()) {
		h.send(m)
	}
}

func (h *harness) keys(keys ...string) {
	h.t.Helper()
	for _, k := range keys {
		h.step(press(k))
	}
}

func (h *harness) view() string { return h.m.render() }

// feed is the server's part of the refresh loop.
func (h *harness) feed() *feed { return h.m.poll.feeds[0] }

// tick is the tick the server's loop waits for.
func (h *harness) tick() tickMsg { return tickMsg{source: 0, seq: h.feed().seq} }

// opened returns the open overlay if it is a T.
func opened[T overlay](h *harness) (T, bool) {
	o, ok := h.m.overlay.(T)
	return o, ok
}

// isOpen reports whether the open overlay is a T.
func isOpen[T overlay](h *harness) bool {
	_, ok := opened[T](h)
	return ok
}

// notes are the details of the rare lines of the event log (the
// dashboard's own notes among them), oldest first.
func (h *harness) notes() []string {
	var out []string
	for _, g := range h.m.events.rare {
		out = append(out, g.detail)
	}
	return out
}

// press builds the key press a terminal would deliver for k.
func press(k string) tea.KeyPressMsg {
	switch k {
	case "enter":
		return tea.KeyPressMsg{Code: tea.KeyEnter}
	case "esc":
		return tea.KeyPressMsg{Code: tea.KeyEscape}
	case "space":
		return tea.KeyPressMsg{Code: tea.KeySpace, Text: " "}
	case "up":
		return tea.KeyPressMsg{Code: tea.KeyUp}
	case "down":
		return tea.KeyPressMsg{Code: tea.KeyDown}
	case "left":
		return tea.KeyPressMsg{Code: tea.KeyLeft}
	case "right":
		return tea.KeyPressMsg{Code: tea.KeyRight}
	case "pgdown":
		return tea.KeyPressMsg{Code: tea.KeyPgDown}
	case "pgup":
		return tea.KeyPressMsg{Code: tea.KeyPgUp}
	case "home":
		return tea.KeyPressMsg{Code: tea.KeyHome}
	case "end":
		return tea.KeyPressMsg{Code: tea.KeyEnd}
	case "backspace":
		return tea.KeyPressMsg{Code: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}
	}
	r := []rune(k)
	if len(r) != 1 {
		panic("press: unknown key " + k)
	}
	return tea.KeyPressMsg{Code: r[0], Text: k}
}

// typeText presses each character of s.
func (h *harness) typeText(s string) {
	h.t.Helper()
	for _, r := range s {
		h.step(press(string(r)))
	}
}

var errLost = errors.New("lost the connection to the server: read: connection reset by peer")
