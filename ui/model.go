package ui

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/record/incident"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// Model is the dashboard: the root Bubble Tea model. It composes the
// refresh loop (poller) and the components — header, gauges, lock table,
// simulator panel, event log, footer — and holds at most one overlay. Data
// arrives only as messages from commands; Update never does I/O.
type Model struct {
	ctx  context.Context
	opts Options
	st   *Styles
	keys KeyMap
	log  *slog.Logger
	now  func() time.Time

	width, height int
	// frame is the screen View last built. reuse says nothing shown has
	// changed since: the one Update since that View was a tick, which only
	// starts a poll. At rest every source's tick is a message, and View
	// built the whole screen for each (a quarter of the idle CPU, issue
	// 26); the renderer already skips writing an equal frame. fresh says
	// no Update came since the last View.
	frame        string
	reuse, fresh bool

	poll    poller
	snaps   []model.Snapshot // the snapshot on screen, per source
	hasSnap []bool
	merged  model.Snapshot // every source's locks; the others from Options.Source's
	beats   heartbeats     // the lease heartbeats seen, for the details

	detector  waitfor.Detector // cycles of waits, poll after poll
	deadlocks []waitfor.Cycle  // the deadlocks now (seen in two polls in a row)

	sim       Simulator
	simBusy   bool // a status read is in flight
	simOnce   bool // paused, show the next simulator status anyway
	scenarios []string
	faults    []string
	held      []model.Event // events that came in while paused

	header   header
	gauges   gauges
	table    lockTable
	simp     simPanel
	events   eventLog
	episodes *incident.Episodes // tells the event log of contention episodes (no simulator)
	// episodesSeen: the tracker has had a snapshot since it was made.
	episodesSeen bool
	// terminated are the backends this dashboard terminated (T): their
	// rows end as outcomeEnded, not as released.
	terminated map[int32]bool
	footer     footer
	overlay    overlay // nil when none is open
	screen     screenKeys
	lay        arrangement
	shapes     steady[bodyShape] // the body's shares, held still
	kindRow    steady[bool]      // the gauges' row of counts per kind, held still
	dbRow      steady[bool]      // the gauges' row of counts per database, held still
	laidW      int               // the size last laid out: a change is a resize
	laidH      int
	hadEvents  bool      // the event log had events at the last layout
	bind       []binding // the main screen's keys
	replay     *timeline // nil unless replaying a recording, or rewound
	rewound    *rewound  // not nil while the live dashboard shows its history
}

// New returns the dashboard for opts. ctx bounds every command it runs.
func New(ctx context.Context, opts Options) *Model {
	st := DefaultStyles()
	st.Marks = opts.NoColor
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Model{ctx: ctx, opts: opts, st: &st, keys: DefaultKeyMap(), log: logger, now: time.Now, sim: opts.Simulator}
	m.keys.setAvailable(m.sim != nil, opts.Terminate != nil)

	var feeds []*feed
	if opts.Replay != nil {
		// A replay's sources are fed by its timeline, never polled.
		opts.Source, opts.Sources = nil, nil
		for _, name := range opts.Replay.Sources() {
			feeds = append(feeds, &feed{name: name})
		}
	}
	if opts.Source != nil {
		name := "PostgreSQL"
		if len(opts.Targets) > 0 {
			name = model.SourceName(opts.Targets[0], "postgres")
		}
		feeds = append(feeds, &feed{name: name, poll: opts.Source.Poll})
	}
	for _, s := range opts.Sources {
		feeds = append(feeds, &feed{name: s.Name(), poll: s.Poll})
	}
	m.poll = newPoller(ctx, opts.Interval, feeds)
	m.poll.fast = opts.FastInterval
	m.poll.beside = func(i int) tea.Cmd {
		if i == 0 {
			return m.readSim()
		}
		return nil
	}
	m.snaps, m.hasSnap = make([]model.Snapshot, len(feeds)), make([]bool, len(feeds))

	m.header = header{st: &st, keys: &m.keys, poll: &m.poll, server: opts.Server, mode: opts.mode(), warnings: opts.Warnings}
	m.gauges = gauges{st: &st}
	m.table = newLockTable(&st, &m.keys)
	m.simp = simPanel{st: &st, keys: &m.keys}
	m.events = eventLog{st: &st}
	m.episodes = incident.NewEpisodes()
	m.footer = footer{st: &st}
	m.screen = screenKeys{m}
	if opts.Source != nil {
		info := opts.Source.Info()
		m.header.info = info
		m.gauges.maxConns = info.MaxConnections
		m.table.db = info.Database
	}
	if opts.History != nil && opts.Replay == nil {
		m.keys.Rewind.SetEnabled(true)
	}
	if opts.Replay != nil {
		info := opts.Replay.Info()
		m.header.info = info
		m.gauges.maxConns = info.MaxConnections
		m.table.db = info.Database
		m.replay = &timeline{st: &st, keys: &m.keys, rep: opts.Replay, speed: 1}
		m.header.replay = m.replay
		m.keys.setReplay(true)
	}
	if m.sim != nil {
		m.scenarios = m.sim.Scenarios()
		m.faults = m.sim.Faults()
	}
	m.setTargets()
	m.bind = m.bindings()
	return m
}

// Init starts the refresh loop and, with a simulator, the event stream.
func (m *Model) Init() tea.Cmd {
	if m.replay != nil {
		return m.startReplay()
	}
	cmds := []tea.Cmd{m.poll.start()}
	if m.sim != nil {
		if ch := m.sim.Events(); ch != nil {
			cmds = append(cmds, waitEvents(m.ctx, ch))
		}
	}
	return tea.Batch(cmds...)
}

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	var cmd tea.Cmd
	quiet := false
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.ColorProfileMsg:
		m.st.Marks = m.opts.NoColor || msg.Profile <= colorprofile.ASCII
		m.laidW = 0 // the marks change the columns' widths: lay out at once
	case SnapshotMsg:
		cmd, quiet = m.onSnapshot(msg)
	case tickMsg:
		cmd = m.poll.onTick(msg)
		quiet = true // the screen changes when the poll answers
	case replayTickMsg:
		cmd = m.onReplayTick(msg)
	case simMsg:
		m.onSim(msg)
	case eventsMsg:
		cmd = m.onEvents(msg)
	case actionMsg:
		cmd = m.onAction(msg)
	case tea.KeyPressMsg:
		cmd = m.onKey(msg)
	default:
		// The filter's cursor, the mouse wheel in the details.
		if m.overlay != nil {
			_, cmd = m.overlay.Update(msg)
		}
	}
	if m.footer.expire(m.now()) {
		quiet = false
	}
	if !quiet {
		// A tick changes nothing laid out: the layout of the last other
		// message stands (at rest, laying out on each tick was most of
		// Update's CPU, issue 26).
		m.layout()
	}
	m.reuse = quiet && m.fresh
	m.fresh = false
	return m, cmd
}

// onSnapshot takes one source's answer: a banner and a log line when the
// source fails or comes back, the table when the answer is shown. quiet:
// the answer changed nothing on screen (unchanged).
func (m *Model) onSnapshot(msg SnapshotMsg) (cmd tea.Cmd, quiet bool) {
	a, cmd := m.poll.onResult(msg)
	if msg.Source < 0 || msg.Source >= len(m.poll.feeds) {
		return cmd, false
	}
	f := m.poll.feeds[msg.Source]
	switch {
	case a.lost != "":
		m.log.Warn("poll failed", "source", f.name, "err", a.lost, "attempt", f.failures, "retry_in", f.retryIn)
		m.liveNote(outcomeInfo, f.name+": connection lost: "+a.lost)
	case a.back > 0:
		m.log.Info("reconnected", "source", f.name, "failed_attempts", a.back)
		m.liveNote(outcomeInfo, f.name+": reconnected after "+strconv.Itoa(a.back)+" failed attempts")
	}
	if a.show {
		if m.rewound != nil {
			m.rewound.newer[msg.Source] = msg.Snapshot // shown on the return to live
			return cmd, false
		}
		if m.unchanged(msg.Source, &msg.Snapshot, a) {
			m.keep(msg.Source, msg.Snapshot)
			return cmd, true
		}
		m.apply(msg.Source, msg.Snapshot)
	}
	return cmd, false
}

// unchanged reports whether source i's answer s shows nothing its last
// shown answer did not: i is not the server (whose poll time and latency
// the header shows), both answers are bare (no locks, so no held time
// ages; no audit, nothing ended), with the same connections, parts and
// truncation, and the source answers as it did. Such an answer (a Redis
// without session mutexes, the watched database's lease tables absent or
// empty) changes no cell of the screen, so it is kept without merging,
// laying out or drawing the frame again: at rest, every other frame was
// one (issue 26).
func (m *Model) unchanged(i int, s *model.Snapshot, a arrival) bool {
	if i == 0 || !m.hasSnap[i] || a.lost != "" || a.back > 0 {
		return false
	}
	p := &m.snaps[i]
	return bare(p) && bare(s) && p.Connections == s.Connections && p.NewWaits == s.NewWaits &&
		p.Truncated == s.Truncated && slices.Equal(p.Partial, s.Partial)
}

// bare: a snapshot with no locks, no audit and nothing ended.
func bare(s *model.Snapshot) bool {
	return len(s.Locks) == 0 && len(s.Audit) == 0 && len(s.Ended) == 0
}

// keep takes source i's unchanged answer s: its time and latency, in its
// snapshot and in the merged snapshot's status of it (a new slice: an open
// details overlay keeps the old snapshot).
func (m *Model) keep(i int, s model.Snapshot) {
	m.snaps[i] = s
	if i < len(m.merged.Sources) {
		m.merged.Sources = slices.Clone(m.merged.Sources)
		m.merged.Sources[i].Taken, m.merged.Sources[i].Latency = s.Taken, s.Latency
	}
}

// apply puts source i's snapshot on screen: the one table holds every
// source's locks, Options.Source's first, each timed by its own source's
// clock (model.Merge).
func (m *Model) apply(i int, s model.Snapshot) {
	if m.hasSnap[i] && m.sim == nil {
		evs := diffEvents(&m.snaps[i], &s)
		for j := range evs {
			if e := &evs[j]; m.terminated[e.PID] && e.PID != 0 && (e.Outcome == outcomeReleased || e.Outcome == outcomeLeft) {
				e.Outcome, e.Wait = outcomeEnded, 0
				e.Detail = strings.TrimPrefix(strings.TrimSpace("terminated by locktop · "+e.Detail), "· ")
			}
		}
		m.events.Add(evs...)
	}
	sourceFirst := !m.hasSnap[i]
	if sourceFirst {
		m.laidW = 0 // a source's first answer is laid out at once, as a resize is
	}
	m.snaps[i], m.hasSnap[i] = s, true
	if len(m.snaps) == 1 {
		m.merged = m.snaps[0]
	} else {
		// A new snapshot each time: an open details overlay keeps the old one.
		parts := make([]model.Part, len(m.snaps))
		for j := range m.snaps {
			parts[j] = model.Part{Name: m.poll.feeds[j].name, Snapshot: m.snaps[j]}
		}
		m.merged = model.Merge(parts)
		if m.hasSnap[0] {
			m.merged.Taken = m.snaps[0].Taken
		}
	}
	if m.episodes != nil && m.sim == nil && !failing(&m.merged) {
		// A source's first answer shows episodes under way, not beginning.
		m.events.Add(episodeEvents(m.episodes, &m.merged, !m.episodesSeen || sourceFirst)...)
		m.episodesSeen = true
	}
	m.beats.note(&s)
	m.table.SetSnapshot(&m.merged)
	if i == 0 {
		m.gauges.SetSnapshot(&m.snaps[0])
		m.watchDeadlocks() // one poll of the server: one step of the two-poll rule
	}
	m.gauges.held, m.gauges.waiting = m.table.held, m.table.waiting
	m.gauges.kinds = m.merged.CountKinds()
	m.gauges.dbs = countDatabases(m.merged.Locks)
	m.countWaits()
}

// readSim reads the simulator's status (its pools with it), unless a read
// is already in flight.
func (m *Model) readSim() tea.Cmd {
	if m.simBusy || m.sim == nil {
		return nil
	}
	m.simBusy = true
	return simCmd(m.sim)
}

func (m *Model) onSim(msg simMsg) {
	m.simBusy = false
	if m.poll.paused && !m.simOnce {
		return
	}
	m.simOnce = false
	if !m.simp.has {
		m.laidW = 0 // the simulator's first status is laid out at once
	}
	m.simp.SetStatus(msg.status, m.now())
	m.gauges.pools = msg.status.Pools
	m.header.locksOff = !msg.status.LocksEnabled
	if msg.faults != nil {
		m.faults = msg.faults // the running scenario's: another runs other systems
	}
}

func (m *Model) onEvents(msg eventsMsg) tea.Cmd {
	if m.poll.paused || m.rewound != nil {
		m.held = append(m.held, msg.events...)
		if over := len(m.held) - heldCapacity; over > 0 {
			m.held = m.held[over:]
		}
	} else {
		m.events.Add(msg.events...)
	}
	var read tea.Cmd
	if !m.poll.paused && slices.ContainsFunc(msg.events, func(e model.Event) bool { return e.Outcome == model.OutcomeViolation }) {
		// The panel's count of broken invariants keeps up with the log
		// that names them, whenever the next poll comes (a slow interval,
		// a reconnect's backoff).
		read = m.readSim()
	}
	if msg.closed || m.sim == nil {
		return read
	}
	return tea.Batch(read, waitEvents(m.ctx, m.sim.Events()))
}

// heldCapacity is how many events a pause keeps for the resume.
const heldCapacity = 5000

func (m *Model) onAction(msg actionMsg) tea.Cmd {
	if msg.err != nil {
		// One line: the error may carry PostgreSQL's DETAIL on a line of its own.
		text := strings.Join(strings.Fields(Sanitize(msg.err.Error())), " ")
		fail := msg.fail
		if fail == "" {
			fail = msg.note + " failed"
		}
		m.log.Warn("action failed", "action", fail, "err", text)
		m.note(model.OutcomeError, fail+": "+text)
		m.setStatus(fail+": "+text, true)
		return nil
	}
	if msg.terminated != 0 {
		if m.terminated == nil {
			m.terminated = map[int32]bool{}
		}
		m.terminated[msg.terminated] = true
	}
	m.log.Info("action", "what", msg.note)
	m.note(outcomeInfo, msg.note)
	m.setStatus(msg.note, false)
	// Show the action's effect now, paused or not.
	if c := m.readSim(); c != nil {
		m.simOnce = m.poll.paused
		return c
	}
	return nil
}

// failing reports whether a source of s did not answer: its locks are
// missing, not released, so no episode ends on them.
func failing(s *model.Snapshot) bool {
	for _, src := range s.Sources {
		if src.Err != "" {
			return true
		}
	}
	return s.PollError() != ""
}

// note adds the dashboard's own line to the event log. On a timeline
// (replay, rewind) it is stamped with the moment shown, so that the log
// tells one clock, the recording's.
func (m *Model) note(o model.Outcome, detail string) {
	at := m.now()
	if r := m.replay; r != nil && r.pos >= 0 && r.pos < r.rep.Len() {
		at = r.rep.Time(r.pos)
	}
	e := model.Event{Time: at, Worker: "locktop", Outcome: o, Detail: detail}
	if m.poll.paused {
		m.held = append(m.held, e)
		return
	}
	m.events.Add(e)
}

func (m *Model) setStatus(s string, isErr bool) { m.footer.say(s, isErr, m.now()) }

// onKey gives a key to the open overlay, or to the main screen. q quits
// from everywhere but an overlay that takes text; ctrl+c from everywhere.
func (m *Model) onKey(msg tea.KeyPressMsg) tea.Cmd {
	msg = unmodified(msg)
	if msg.String() == "ctrl+c" {
		return m.quit()
	}
	if o := m.overlay; o != nil {
		if key.Matches(msg, m.keys.Quit) && !takesText(o) {
			return m.quit()
		}
		open, cmd := o.Update(msg)
		if !open && m.overlay == o {
			m.overlay = nil
		}
		return cmd
	}
	if handled, status := m.table.onKey(msg); handled {
		if status != "" {
			m.setStatus(status, false)
		}
		return nil
	}
	for _, b := range m.bind {
		if key.Matches(msg, *b.key) {
			return b.do()
		}
	}
	for _, b := range m.bind {
		if b.off != "" && !b.key.Enabled() && pressed(msg, *b.key) {
			m.setStatus(b.off, true)
			return nil
		}
	}
	if modified(msg) {
		m.setStatus(msg.String()+" ignored: no key of locktop (an esc and a key pressed quickly arrive as one)", true)
	}
	return nil
}

// open opens an overlay, sized for the screen.
func (m *Model) open(o overlay) {
	m.overlay = o
	m.layout()
}

func (m *Model) quit() tea.Cmd {
	m.log.Info("quit")
	return tea.Quit
}

// View renders the screen.
func (m *Model) View() tea.View {
	if !m.reuse {
		m.frame = m.render()
	}
	m.reuse, m.fresh = false, true
	v := tea.NewView(m.frame)
	v.AltScreen = true
	v.WindowTitle = "locktop · " + m.header.serverLabel()
	return v
}

// render is the screen as a string.
func (m *Model) render() string {
	w, h := m.width, m.height
	if w == 0 || h == 0 {
		return "locktop: starting…"
	}
	if w < MinWidth || h < MinHeight {
		return m.tooSmall()
	}
	base := m.header.View() + "\n" + m.gauges.View() + "\n" + m.body() + "\n"
	if m.replay != nil {
		base += m.replay.View() + "\n" // the timeline, above the footer
	}
	base += m.footerView()
	o := m.overlay
	if o == nil || o.Place() == placeFooter {
		return base
	}
	box := o.View()
	switch o.Place() {
	case placeBody:
		return compose(m.st, base, box, 0, 1, w, h)
	default:
		bw, bh := lipgloss.Size(box)
		x, y := centre(bw, bh, w, h)
		return compose(m.st, base, box, x, y, w, h)
	}
}

// footerView is the footer line: the filter's editor while it is open,
// else the keys of what has them (the overlay, or the screen) and the
// status.
func (m *Model) footerView() string {
	m.footer.keys = m.keys.ShortHelp()
	if o := m.overlay; o != nil {
		if o.Place() == placeFooter {
			return o.View()
		}
		m.footer.keys = o.ShortHelp()
	}
	return m.footer.View()
}

func (m *Model) tooSmall() string {
	msg := "locktop needs a terminal of at least " + strconv.Itoa(MinWidth) + "×" + strconv.Itoa(MinHeight) +
		"; this one is " + strconv.Itoa(m.width) + "×" + strconv.Itoa(m.height) + ".\nMake it larger, or press " +
		hint(m.keys.Quit) + " to quit."
	box := lipgloss.NewStyle().Width(max(m.width-2, 1)).Align(lipgloss.Center).Render(msg)
	return lipgloss.Place(m.width, m.height, lipgloss.Center, lipgloss.Center, box)
}
