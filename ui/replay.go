package ui

import (
	"github.com/locktop/locktop/internal/record/incident"
	"strconv"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// Replay is a recording the dashboard plays instead of polling (locktop
// replay); *recording.Recording satisfies it. Its steps are recorded
// snapshots, one source's each, in time order. Calls come from Update: they
// decode in memory and do no other I/O.
type Replay interface {
	// Len is the number of steps.
	Len() int
	// Time is step i's Taken.
	Time(i int) time.Time
	// Source is the source step i is of: 0 is the PostgreSQL monitor,
	// i is Sources()[i].
	Source(i int) int
	// At is every source's snapshot as of step i (Taken zero: none yet).
	At(i int) ([]model.Snapshot, error)
	// Sources names the recorded sources.
	Sources() []string
	// Info describes the recorded server.
	Info() model.ServerInfo
	// Seek finds the step a time typed by the operator names ("03:12:05",
	// "+30s", "end"), from step cur.
	Seek(text string, cur int) (int, error)
}

// replayTickMsg advances a playing replay; seq tells the current tick from
// one armed before a pause, a step or a change of speed.
type replayTickMsg struct{ seq int }

// speeds are the replay speeds "faster" and "slower" move through.
var speeds = []float64{0.25, 0.5, 1, 2, 4, 8, 16, 32, 64}

// Playing redraws at most this often: faster, a tick takes several steps.
const replayFrame = 50 * time.Millisecond

// maxReplayWait is the longest a replay waits for its next step: a gap in
// the recording (the recorder stopped, the server did not answer) is not
// played in real time.
const maxReplayWait = 2 * time.Second

// startReplay shows the step the replay opens at.
func (m *Model) startReplay() tea.Cmd {
	if m.replay.rep.Len() == 0 {
		m.setStatus("the recording holds no snapshot", true)
		return nil
	}
	m.jump(min(max(m.opts.ReplayAt, 0), m.replay.rep.Len()-1), "")
	return nil
}

// jump shows step i after a seek or a step back: every source at once, the
// event log started afresh (its diffs would tell of the jump, not of the
// locks).
func (m *Model) jump(i int, why string) {
	snaps, err := m.replay.rep.At(i)
	if err != nil {
		m.setStatus(Sanitize(err.Error()), true)
		return
	}
	m.replay.pos = i
	m.events = eventLog{st: m.st}
	m.episodes, m.episodesSeen = incident.NewEpisodes(), false // the episodes of the moment jumped to, from there
	m.layout()                                                 // the fresh log's size
	for s := range m.hasSnap {
		m.hasSnap[s] = false
	}
	// A source in an outage at step i shows its last answer before it,
	// as it did when it was recorded, not what the screen had (after a
	// step back, a later answer).
	for s := range snaps {
		if snaps[s].PollError() == "" {
			continue
		}
		if good, ok := m.lastAnswer(i, s); ok {
			only := make([]model.Snapshot, len(snaps))
			only[s] = good
			m.show(only)
		} else if s < len(m.snaps) {
			m.apply(s, model.Snapshot{}) // no answer recorded before it
			m.shownFeed(s).taken = time.Time{}
		}
	}
	m.show(snaps)
	if why != "" {
		m.note(outcomeInfo, why+" "+m.replay.rep.Time(i).Format("15:04:05"))
	}
}

// shownFeed is the state of source s the banners show: the live loop's
// in a replay; in a rewound dashboard, whose live feeds stay the live
// loop's, the timeline's own.
func (m *Model) shownFeed(s int) *feed {
	if m.rewound != nil {
		return m.header.recorded[s]
	}
	return m.poll.feeds[s]
}

// lastAnswer is source s's last snapshot of locks before step i, looked
// for among the maxLookBack steps before it.
func (m *Model) lastAnswer(i, s int) (model.Snapshot, bool) {
	const maxLookBack = 2000
	rep := m.replay.rep
	for j := i - 1; j >= 0 && j >= i-maxLookBack; j-- {
		if rep.Source(j) != s {
			continue
		}
		snaps, err := rep.At(j)
		if err != nil || s >= len(snaps) {
			return model.Snapshot{}, false
		}
		if snaps[s].PollError() == "" && !snaps[s].Taken.IsZero() {
			return snaps[s], true
		}
	}
	return model.Snapshot{}, false
}

// advance shows step i, after the one on screen: the sources whose
// snapshot changed, with the event log telling what changed.
func (m *Model) advance(i int) {
	snaps, err := m.replay.rep.At(i)
	if err != nil {
		m.setStatus(Sanitize(err.Error()), true)
		m.replay.playing = false
		return
	}
	m.replay.pos = i
	m.show(snaps)
}

// show puts the sources' snapshots on screen, those that changed.
func (m *Model) show(snaps []model.Snapshot) {
	for s, snap := range snaps {
		if s >= len(m.snaps) || snap.Taken.IsZero() || (m.hasSnap[s] && m.snaps[s].Taken.Equal(snap.Taken)) {
			continue
		}
		f := m.shownFeed(s)
		if e := snap.PollError(); e != "" {
			// A recorded failed poll: the banner as it was, the locks
			// of the last answer still on screen.
			f.conn, f.lastErr, f.failures = connLost, Sanitize(e), f.failures+1
			continue
		}
		f.conn, f.taken, f.latency, f.failures = connOK, snap.Taken, snap.Latency, 0
		m.apply(s, snap)
	}
}

// replayPlay plays or pauses.
func (m *Model) replayPlay() tea.Cmd {
	r := m.replay
	if r.playing {
		r.playing = false
		r.seq++
		m.setStatus("paused at "+r.rep.Time(r.pos).Format("15:04:05"), false)
		return nil
	}
	if r.pos >= r.rep.Len()-1 {
		m.setStatus("at the end of the recording: "+hint(m.keys.StepBack)+" or "+hint(m.keys.Seek)+" to go back", true)
		return nil
	}
	r.playing = true
	m.setStatus("playing ×"+fmtSpeed(r.speed), false)
	return m.armReplay()
}

// armReplay schedules the next step of a playing replay: the recording's
// gap to it, at the speed, at most maxReplayWait.
func (m *Model) armReplay() tea.Cmd {
	r := m.replay
	r.seq++
	gap := r.rep.Time(r.pos + 1).Sub(r.rep.Time(r.pos))
	wait := min(max(time.Duration(float64(gap)/r.speed), replayFrame), maxReplayWait)
	return m.poll.after(wait, replayTickMsg{seq: r.seq})
}

// onReplayTick takes the next step, and every step a frame's worth of
// recording after it, and arms the next tick.
func (m *Model) onReplayTick(msg replayTickMsg) tea.Cmd {
	r := m.replay
	if r == nil || msg.seq != r.seq || !r.playing {
		return nil
	}
	next := r.pos + 1
	reach := r.rep.Time(next).Add(time.Duration(float64(replayFrame) * r.speed))
	for next+1 < r.rep.Len() && !r.rep.Time(next+1).After(reach) && r.rep.Time(next+1).Sub(r.rep.Time(r.pos)) < maxReplayWait*time.Duration(r.speed+1) {
		next++
	}
	m.advance(next)
	if r.pos >= r.rep.Len()-1 {
		r.playing = false
		m.setStatus("end of the recording", false)
		return nil
	}
	if !r.playing {
		return nil
	}
	return m.armReplay()
}

// replayStep moves one step back or forward, pausing.
func (m *Model) replayStep(dir int) tea.Cmd {
	r := m.replay
	r.playing = false
	r.seq++
	i := r.pos + dir
	switch {
	case i < 0:
		m.setStatus("at the start of the recording", true)
	case i >= r.rep.Len():
		m.setStatus("at the end of the recording", true)
	case dir > 0:
		m.advance(i)
		m.setStatus("step "+strconv.Itoa(i+1)+" of "+strconv.Itoa(r.rep.Len()), false)
	default:
		m.jump(i, "")
		m.setStatus("step "+strconv.Itoa(i+1)+" of "+strconv.Itoa(r.rep.Len()), false)
	}
	return nil
}

// replaySpeed moves the speed one step up (+1) or down.
func (m *Model) replaySpeed(dir int) tea.Cmd {
	r := m.replay
	for i, s := range speeds {
		if s == r.speed && i+dir >= 0 && i+dir < len(speeds) {
			r.speed = speeds[i+dir]
			break
		}
	}
	m.setStatus("speed ×"+fmtSpeed(r.speed), false)
	if r.playing {
		return m.armReplay()
	}
	return nil
}

// openSeek asks for a time to seek to.
func (m *Model) openSeek() tea.Cmd {
	s, cmd := newSeekInput(m.st, &m.keys, func(text string) {
		i, err := m.replay.rep.Seek(text, m.replay.pos)
		if err != nil {
			m.setStatus(Sanitize(err.Error()), true)
			return
		}
		m.replay.playing = false
		m.replay.seq++
		m.jump(i, "seek to")
		m.setStatus("at "+m.replay.rep.Time(i).Format("15:04:05")+" · step "+strconv.Itoa(i+1)+" of "+strconv.Itoa(m.replay.rep.Len()), false)
	})
	m.open(s)
	return cmd
}

func fmtSpeed(s float64) string { return strconv.FormatFloat(s, 'f', -1, 64) }
