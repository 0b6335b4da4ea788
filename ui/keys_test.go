package ui

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// gate is a terminal's input that delivers chunks, each in one read,
// then q once the test says the program has taken them in.
type gate struct {
	mu     sync.Mutex
	chunks []string
	done   chan struct{} // closed by the test: send q
	quit   bool          // q was sent: the input ends
}

func (g *gate) Read(b []byte) (int, error) {
	g.mu.Lock()
	if len(g.chunks) > 0 {
		n := copy(b, g.chunks[0])
		g.chunks = g.chunks[1:]
		g.mu.Unlock()
		return n, nil
	}
	quit := g.quit
	g.quit = true
	g.mu.Unlock()
	if quit {
		return 0, io.EOF
	}
	<-g.done
	return copy(b, "q"), nil
}

// keyRecorder passes every message to the dashboard and notes the key
// presses, so the test knows when the input has been taken in.
type keyRecorder struct {
	*Model
	mu   sync.Mutex
	keys []string
}

func (r *keyRecorder) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		r.mu.Lock()
		r.keys = append(r.keys, k.String())
		r.mu.Unlock()
	}
	_, cmd := r.Model.Update(msg)
	return r, cmd
}

func (r *keyRecorder) pressed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// An esc and a letter that arrive in one read are one modified key
// (alt+l): it runs nothing, not the letter's command, whatever the
// terminal's encoding of it; the screen says it was ignored.
func TestKeysArrivingTogetherRunNothing(t *testing.T) {
	for _, in := range []string{"\x1bl", "\x1b/", "\x1bs", "\x1b[108;3u", "\x1b[108;3;108u", "\x1b[27;3;108~"} {
		sim := &fakeSim{status: simStatus()}
		ctx, cancel := context.WithCancel(context.Background())
		m := New(ctx, Options{Source: &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: sample()}}}, Simulator: sim,
			Interval: 20 * time.Millisecond})
		rec := &keyRecorder{Model: m}
		g := &gate{chunks: []string{in}, done: make(chan struct{})}
		p := tea.NewProgram(rec, tea.WithInput(g), tea.WithOutput(io.Discard), tea.WithWindowSize(100, 30), tea.WithContext(ctx))
		errc := make(chan error, 1)
		go func() { _, err := p.Run(); errc <- err }()
		deadline := time.Now().Add(10 * time.Second)
		for len(rec.pressed()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // polling the program's progress, with a deadline
		}
		close(g.done)
		if err := <-errc; err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		cancel()
		keys := rec.pressed()
		if len(keys) < 2 {
			t.Fatalf("%q: the program read %v", in, keys)
		}
		if calls := sim.Calls(); len(calls) > 0 {
			t.Errorf("%q (read as %s) ran %v", in, keys[0], calls)
		}
		if m.overlay != nil {
			t.Errorf("%q (read as %s) opened an overlay", in, keys[0])
		}
		if !strings.Contains(m.footer.status, "ignored") {
			t.Errorf("%q (read as %s): the footer does not say the key was ignored: %q", in, keys[0], m.footer.status)
		}
	}
}

// A modified key is never its letter, even when the terminal sends the
// letter's text with it.
func TestModifiedKeyIsNotItsLetter(t *testing.T) {
	hs := newHarness(t, Options{Simulator: &fakeSim{status: simStatus()}})
	hs.start(100, 30)
	for _, mod := range []tea.KeyMod{tea.ModAlt, tea.ModCtrl, tea.ModMeta, tea.ModSuper} {
		hs.send(tea.KeyPressMsg{Code: 'l', Mod: mod, Text: "l"})
		hs.send(tea.KeyPressMsg{Code: '/', Mod: mod, Text: "/"})
	}
	if calls := hs.sim.Calls(); len(calls) > 0 || hs.m.overlay != nil {
		t.Errorf("modified keys ran %v, overlay %T", calls, hs.m.overlay)
	}
}

// Locks switched off stay on screen, in the header, until switched back.
func TestLocksOffStaysOnScreen(t *testing.T) {
	hs := newHarness(t, Options{Simulator: &fakeSim{status: simStatus()}})
	hs.start(80, 24)
	status := func() { hs.send(simMsg{status: hs.sim.status}) }
	hs.keys("l")
	status()
	for range 3 { // the status line's message expires; the header's mark does not
		hs.m.now = func() time.Time { return t0.Add(time.Minute) }
		hs.send(hs.tick())
	}
	if top := strings.SplitN(ansi.Strip(hs.view()), "\n", 2)[0]; !strings.Contains(top, "LOCKS OFF") {
		t.Errorf("locks off, the header does not say so: %q", top)
	}
	hs.keys("l")
	status()
	if top := strings.SplitN(ansi.Strip(hs.view()), "\n", 2)[0]; strings.Contains(top, "LOCKS OFF") {
		t.Errorf("locks back on, the header still says off: %q", top)
	}
}
