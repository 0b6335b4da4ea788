package ui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// loopPhase is where one source's loop is. Exactly one tick or one poll
// is outstanding while it runs, so changing the interval or forcing a
// refresh never starts a second loop.
type loopPhase int

const (
	phaseIdle    loopPhase = iota // stopped: paused, or not started
	phaseWaiting                  // a tick is armed
	phasePolling                  // a poll is in flight
)

// connState is the state of a source.
type connState int

const (
	connConnecting connState = iota // no poll has answered yet
	connOK
	connLost // the last poll failed; retrying with backoff
)

// feed is one source's part of the loop: the re-armed tick, the poll, and
// how the source has been answering. Feed 0 is Options.Source.
type feed struct {
	name  string
	poll  func(ctx context.Context) (model.Snapshot, error)
	phase loopPhase
	seq   int  // the current tick; an older one is stale
	once  bool // paused: show the next answer anyway (refresh now)

	conn     connState
	failures int           // failed polls in a row
	lastErr  string        // the last failure, sanitised
	retryIn  time.Duration // until the next attempt, after a failure
	taken    time.Time     // the snapshot on screen
	latency  time.Duration // its poll's
	// partial and truncated are the last answer's Snapshot.Partial (the
	// parts of the source that did not answer) and Truncated.
	partial   []string
	truncated bool
	waiting   bool // its last answer had a waiter
}

// poller is the refresh loop of every source: a re-armed tea.Tick per
// source, a poll in a command, the poll's answer arming the next tick.
// Pausing stops every loop outright (an idle dashboard costs nothing); a
// failed poll is retried after a backoff of 1, 2, 4 … 30 seconds, for that
// source alone. The poller decides when to poll and whether an answer is
// shown; the model puts what is shown on screen, and the header renders the
// poller's state.
type poller struct {
	ctx      context.Context
	after    func(time.Duration, tea.Msg) tea.Cmd // tea.Tick; tests replace it
	interval time.Duration
	// fast, when not zero, is the interval while any source's last
	// answer had a waiter: a wait of a few hundred milliseconds is seen
	// (and kept in the history), and at rest the load stays the
	// interval's.
	fast   time.Duration
	paused bool
	feeds  []*feed
	// beside is run when feed i starts a poll: the simulator's status is
	// read beside the server's poll.
	beside func(i int) tea.Cmd
}

// pollTimeout bounds one poll, on top of a source's own timeouts (the
// monitor's statement_timeout), so a dead network never hangs the loop.
const pollTimeout = 10 * time.Second

// arrival is what the model does with one source's answer.
type arrival struct {
	show bool   // put the snapshot on screen
	lost string // not "": the source has just failed, or failed otherwise than before
	back int    // > 0: the source answers again after this many failed polls
}

func newPoller(ctx context.Context, interval time.Duration, feeds []*feed) poller {
	return poller{
		ctx: ctx,
		after: func(d time.Duration, msg tea.Msg) tea.Cmd {
			return tea.Tick(onGrid(time.Now(), d), func(time.Time) tea.Msg { return msg })
		},
		interval: interval,
		feeds:    feeds,
		beside:   func(int) tea.Cmd { return nil },
	}
}

// onGrid is the wait from now until the first multiple of d (counted from
// the zero time, as time.Truncate counts) at least d/2 away. The sources'
// loops are armed each at its own answer; waiting for the grid makes their
// ticks fall due together, one wake-up of the process for all of them (at
// rest the wake-ups are most of its CPU, issue 26), while each still polls
// about every d.
func onGrid(now time.Time, d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	from := now.Add(d / 2)
	at := from.Truncate(d)
	if at.Before(from) {
		at = at.Add(d)
	}
	return at.Sub(now)
}

// start polls every source: the first refresh.
func (p *poller) start() tea.Cmd {
	cmds := make([]tea.Cmd, 0, len(p.feeds))
	for i := range p.feeds {
		cmds = append(cmds, p.pollNow(i))
	}
	return tea.Batch(cmds...)
}

// pollNow sends feed i's poll, and what goes beside it.
func (p *poller) pollNow(i int) tea.Cmd {
	f := p.feeds[i]
	f.phase = phasePolling
	ctx, poll := p.ctx, f.poll
	cmd := func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, pollTimeout)
		defer cancel()
		snap, err := poll(ctx)
		return SnapshotMsg{Source: i, Snapshot: snap, Err: err}
	}
	return tea.Batch(cmd, p.beside(i))
}

// arm schedules feed i's next poll after d.
func (p *poller) arm(i int, d time.Duration) tea.Cmd {
	f := p.feeds[i]
	f.phase = phaseWaiting
	f.seq++
	return p.after(d, tickMsg{source: i, seq: f.seq})
}

// onTick polls the tick's source, unless the tick is stale or the
// dashboard paused (which ends the loop until resumed).
func (p *poller) onTick(msg tickMsg) tea.Cmd {
	if msg.source < 0 || msg.source >= len(p.feeds) {
		return nil
	}
	f := p.feeds[msg.source]
	if msg.seq != f.seq || f.phase != phaseWaiting {
		return nil // armed before the interval changed or a refresh was forced
	}
	if p.paused {
		f.phase = phaseIdle
		return nil
	}
	return p.pollNow(msg.source)
}

// backoff is the wait before reconnect attempt n (1, 2, 4 … 30 seconds).
func backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// onResult takes a source's answer: it says whether to show it and what
// changed in the source's health, and arms the source's next tick when the
// answer is to the loop's own poll (a SnapshotMsg sent from elsewhere is
// shown, but does not drive the loop).
func (p *poller) onResult(msg SnapshotMsg) (arrival, tea.Cmd) {
	var a arrival
	if msg.Source < 0 || msg.Source >= len(p.feeds) {
		return a, nil
	}
	f := p.feeds[msg.Source]
	ours := f.phase == phasePolling
	if ours {
		f.phase = phaseIdle
	}
	if msg.Err != nil {
		f.failures++
		text := Sanitize(msg.Err.Error())
		if f.conn != connLost || text != f.lastErr {
			a.lost = text
		}
		f.conn, f.lastErr, f.retryIn = connLost, text, backoff(f.failures)
		if ours {
			return a, p.arm(msg.Source, f.retryIn)
		}
		return a, nil
	}
	if f.conn == connLost {
		a.back = f.failures
	}
	f.conn, f.failures = connOK, 0
	f.partial, f.truncated = msg.Snapshot.Partial, msg.Snapshot.Truncated
	if !p.paused || f.once {
		f.once = false
		a.show = true
		f.taken, f.latency = msg.Snapshot.Taken, msg.Snapshot.Latency
	}
	_, waiting := msg.Snapshot.Counts()
	f.waiting = waiting > 0
	if ours && !p.paused {
		return a, p.arm(msg.Source, p.due())
	}
	return a, nil
}

// due is the interval to the next poll: fast while any source has a
// waiter, else the interval.
func (p *poller) due() time.Duration {
	if p.fast <= 0 || p.fast >= p.interval {
		return p.interval
	}
	for _, f := range p.feeds {
		if f.waiting && f.conn == connOK {
			return p.fast
		}
	}
	return p.interval
}

// togglePause pauses every loop, or resumes them with a poll at once.
func (p *poller) togglePause() tea.Cmd {
	p.paused = !p.paused
	if p.paused {
		return nil
	}
	var cmds []tea.Cmd
	for i, f := range p.feeds {
		if f.phase == phaseIdle {
			cmds = append(cmds, p.pollNow(i))
		}
	}
	return tea.Batch(cmds...)
}

// refreshNow polls every source at once; paused, the answers are shown
// once.
func (p *poller) refreshNow() tea.Cmd {
	var cmds []tea.Cmd
	for i, f := range p.feeds {
		if p.paused {
			f.once = true
		}
		switch f.phase {
		case phasePolling:
			continue
		case phaseWaiting:
			f.seq++ // the armed tick is now stale
		}
		cmds = append(cmds, p.pollNow(i))
	}
	return tea.Batch(cmds...)
}

// step moves the refresh interval one step faster (-1) or slower, and
// re-arms the sources that wait for their next tick (not those backing off).
func (p *poller) step(dir int) tea.Cmd {
	p.interval = nextInterval(p.interval, dir)
	var cmds []tea.Cmd
	for i, f := range p.feeds {
		if f.phase == phaseWaiting && f.conn != connLost {
			cmds = append(cmds, p.arm(i, p.due()))
		}
	}
	return tea.Batch(cmds...)
}

// nextInterval is the step below cur (dir < 0) or above it; an interval
// between steps (from --interval) moves to the nearest step that way.
func nextInterval(cur time.Duration, dir int) time.Duration {
	if dir < 0 {
		for i := len(intervals) - 1; i >= 0; i-- {
			if intervals[i] < cur {
				return intervals[i]
			}
		}
		return cur
	}
	for _, d := range intervals {
		if d > cur {
			return d
		}
	}
	return cur
}
