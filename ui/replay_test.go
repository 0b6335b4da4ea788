package ui

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// fakeReplay is a recording in memory: one source, a snapshot a second.
type fakeReplay struct{ snaps []model.Snapshot }

func (f *fakeReplay) Len() int                           { return len(f.snaps) }
func (f *fakeReplay) Time(i int) time.Time               { return f.snaps[i].Taken }
func (f *fakeReplay) Source(int) int                     { return 0 }
func (f *fakeReplay) Sources() []string                  { return []string{"PostgreSQL"} }
func (f *fakeReplay) Info() model.ServerInfo             { return info }
func (f *fakeReplay) At(i int) ([]model.Snapshot, error) { return []model.Snapshot{f.snaps[i]}, nil }

// Seek takes a time of day or a step number ("#3"), enough to drive the
// prompt; the real parsing is recording.ParseAt's.
func (f *fakeReplay) Seek(text string, cur int) (int, error) {
	t, err := time.Parse("15:04:05", text)
	if err != nil {
		return 0, errors.New("not a time")
	}
	for i := len(f.snaps) - 1; i >= 0; i-- {
		if c := f.snaps[i].Taken; c.Hour()*3600+c.Minute()*60+c.Second() <= t.Hour()*3600+t.Minute()*60+t.Second() {
			return i, nil
		}
	}
	return 0, nil
}

// recorded is five seconds of the sample: at 15:04:07 a new waiter joins
// AGENT 9, at 15:04:08 AGENT 7's holder is gone and its first waiter holds it.
func recorded() *fakeReplay {
	var out []model.Snapshot
	for i := range 5 {
		s := sample()
		s.Taken = t0.Add(time.Duration(i) * time.Second)
		if i >= 2 {
			s.Locks = append(s.Locks[:5:5], append([]model.Lock{waiting(lock("AGENT", 9, 4260, "hook.stop", false), 2, 0, 4300)}, s.Locks[5:]...)...)
		}
		if i >= 3 {
			s.Locks[1].Granted, s.Locks[1].QueuePos, s.Locks[1].HeldSince, s.Locks[1].BlockedBy = true, 0, s.Taken, nil
			s.Locks[2].QueuePos, s.Locks[2].BlockedBy = 1, []int32{4250}
			s.Locks = s.Locks[1:]
		}
		out = append(out, s)
	}
	return &fakeReplay{snaps: out}
}

func newReplay(t *testing.T, at int) *harness {
	h := newHarness(t, Options{Replay: recorded(), ReplayAt: at, Server: "monitor@db.internal:5432/app"})
	h.start(120, 30)
	return h
}

// timelineLine is the line above the footer.
func timelineLine(h *harness) string {
	lines := strings.Split(h.view(), "\n")
	return lines[len(lines)-2]
}

func TestReplayOpens(t *testing.T) {
	h := newReplay(t, 1)
	golden(t, "replay_open_120x30", h.view())
	checkFrame(t, h.view(), 120, 30)
	if h.src.polls != 0 {
		t.Fatalf("a replay polled its source %d times", h.src.polls)
	}
}

func TestReplayStepsAndPlays(t *testing.T) {
	h := newReplay(t, 0)
	h.keys("right", "right")
	if h.m.replay.pos != 2 {
		t.Fatalf("at step %d, want 2", h.m.replay.pos)
	}
	// The event log tells of the waiter that joined, as it would live.
	if v := h.view(); !strings.Contains(v, "4260") {
		t.Fatalf("the new waiter is not on screen:\n%s", v)
	}
	golden(t, "replay_step_timeline", timelineLine(h))

	h.keys("space")
	if !h.m.replay.playing || len(h.armed) != 1 || h.armed[0] != time.Second {
		t.Fatalf("playing %v, armed %v: want a tick after the recording's gap, 1s", h.m.replay.playing, h.armed)
	}
	h.keys(">")
	if h.armed[len(h.armed)-1] != 500*time.Millisecond {
		t.Fatalf("at ×2 armed %v, want 500ms", h.armed)
	}
	stale := replayTickMsg{seq: h.m.replay.seq - 1}
	h.send(stale)
	if h.m.replay.pos != 2 {
		t.Fatal("a stale tick moved the replay")
	}
	h.send(replayTickMsg{seq: h.m.replay.seq})
	if h.m.replay.pos != 3 {
		t.Fatalf("a tick took the replay to %d, want 3", h.m.replay.pos)
	}
	golden(t, "replay_playing_120x30", h.view())
	h.send(replayTickMsg{seq: h.m.replay.seq})
	if h.m.replay.pos != 4 || h.m.replay.playing {
		t.Fatalf("at %d, playing %v: the end stops it", h.m.replay.pos, h.m.replay.playing)
	}
	golden(t, "replay_end_timeline", timelineLine(h))
}

func TestReplaySeekAndBack(t *testing.T) {
	h := newReplay(t, 4)
	h.keys("t")
	h.typeText("15:04:06")
	golden(t, "replay_seek_prompt", strings.Split(h.view(), "\n")[29])
	h.keys("enter")
	if h.m.replay.pos != 1 {
		t.Fatalf("seek to 15:04:06 went to %d, want 1", h.m.replay.pos)
	}
	h.keys("left")
	if h.m.replay.pos != 0 {
		t.Fatalf("at %d after a step back, want 0", h.m.replay.pos)
	}
	h.keys("left")
	if !strings.Contains(h.view(), "at the start of the recording") {
		t.Fatal("a step back from the start says nothing")
	}
	// Every view of the live dashboard works on the recording: the filter,
	// the details.
	h.keys("/")
	h.typeText("AGENT 9")
	h.keys("enter", "enter")
	if !isOpen[*details](h) {
		t.Fatal("the details did not open")
	}
	h.keys("esc", "r")
	if !strings.Contains(h.view(), "a replay does not refresh") {
		t.Fatal("r in a replay says nothing")
	}
}

// A replay frame is the live frame and the timeline, built once: the
// screen is not built, thrown away and built again (footerView, which
// sets the footer's keys, ran twice), so it costs about what a live frame
// costs, not twice that.
func TestReplayFrameBuiltOnce(t *testing.T) {
	h := newReplay(t, 2)
	replay := testing.AllocsPerRun(20, func() { h.m.render() })
	timeline := testing.AllocsPerRun(20, func() { _ = h.m.replay.View() })
	r := h.m.replay
	h.m.replay = nil // the same screen, live
	live := testing.AllocsPerRun(20, func() { h.m.render() })
	h.m.replay = r
	if replay > 1.5*(live+timeline) {
		t.Errorf("a replay frame allocates %.0f times, a live one %.0f and the timeline %.0f: the frame is built more than once", replay, live, timeline)
	}
}

// A replay's event log tells one clock, the recording's: its own notes
// (a seek) are stamped with the moment shown, not with the wall clock
// (the log mixed "04:06:38 seek" with recorded times).
func TestReplayNotesOnRecordedClock(t *testing.T) {
	h := newReplay(t, 4)
	h.m.now = func() time.Time { return t0.Add(3 * time.Hour) } // the operator's clock, hours later
	h.keys("t")
	h.typeText("15:04:06")
	h.keys("enter")
	for _, line := range strings.Split(ansi.Strip(h.view()), "\n") {
		if strings.Contains(line, "info") && strings.Contains(line, "seek to") && !strings.HasPrefix(strings.TrimSpace(line), "15:04:06 ") {
			t.Fatalf("the seek is not stamped with the recorded moment: %q", line)
		}
	}
}
