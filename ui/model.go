package ui

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// loopPhase is where the polling loop is. Exactly one tick or one poll is
// outstanding while it runs, so changing the interval or forcing a refresh
// never starts a second loop.
type loopPhase int

const (
	phaseIdle    loopPhase = iota // stopped: paused, or not started
	phaseWaiting                  // a tick is armed
	phasePolling                  // a poll is in flight
)

// Model is the dashboard: the root Bubble Tea model, which owns the polling
// loop and composes the components (header, gauges, lock table, simulator
// panel, event log, footer, and the overlays). Data arrives only as
// messages from commands; Update never does I/O.
type Model struct {
	ctx   context.Context
	opts  Options
	st    *Styles
	keys  KeyMap
	log   *slog.Logger
	now   func() time.Time
	after func(time.Duration, tea.Msg) tea.Cmd // tea.Tick; tests replace it

	width, height int

	interval time.Duration
	paused   bool
	snapOnce bool // paused, show the next snapshot anyway (refresh now)
	simOnce  bool // paused, show the next simulator status anyway
	phase    loopPhase
	seq      int
	snap     model.Snapshot
	hasSnap  bool
	failures int

	sim       Simulator
	simBusy   bool // a status read is in flight
	scenarios []string
	faults    []string
	held      []model.Event // events that came in while paused

	header   header
	gauges   gauges
	table    lockTable
	simp     simPanel
	events   eventLog
	helpOv   helpOverlay
	details  details
	filterIn filterInput
	confirm  confirm
	chooser  *chooser

	showHelp    bool
	showDetails bool

	status      string
	statusErr   bool
	statusUntil time.Time
}

// statusFor is how long a status message stays in the footer.
const statusFor = 5 * time.Second

// New returns the dashboard for opts. ctx bounds every command it runs.
func New(ctx context.Context, opts Options) *Model {
	st := DefaultStyles()
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := &Model{
		ctx:      ctx,
		opts:     opts,
		st:       &st,
		keys:     DefaultKeyMap(),
		log:      logger,
		now:      time.Now,
		after:    func(d time.Duration, msg tea.Msg) tea.Cmd { return tea.Tick(d, func(time.Time) tea.Msg { return msg }) },
		interval: opts.Interval,
		sim:      opts.Simulator,
		table:    newLockTable(&st),
		helpOv:   newHelpOverlay(&st),
		details:  newDetails(&st),
		filterIn: newFilterInput(&st),
	}
	st.Marks = opts.NoColor
	m.keys.setAvailable(m.sim != nil, opts.Terminate != nil)
	m.header = header{st: &st, mode: opts.Mode}
	m.gauges = gauges{st: &st}
	m.simp = simPanel{st: &st}
	m.events = eventLog{st: &st}
	m.confirm = confirm{st: &st}
	if opts.Source != nil {
		info := opts.Source.Info()
		m.header.info = info
		m.gauges.maxConns = info.MaxConnections
		m.table.db = info.Database
	}
	if m.sim != nil {
		m.scenarios = m.sim.Scenarios()
		m.faults = m.sim.Faults()
	}
	return m
}

// Init starts the polling loop and, with a simulator, the event stream.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.startPoll()}
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
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.ColorProfileMsg:
		m.st.Marks = m.opts.NoColor || msg.Profile <= colorprofile.ASCII
	case SnapshotMsg:
		cmd = m.onSnapshot(msg)
	case tickMsg:
		cmd = m.onTick(msg)
	case simMsg:
		m.onSim(msg)
	case eventsMsg:
		cmd = m.onEvents(msg)
	case actionMsg:
		cmd = m.onAction(msg)
	case tea.KeyPressMsg:
		cmd = m.onKey(msg)
	default:
		// The filter's cursor blinks, the details view scrolls with the mouse.
		switch {
		case m.filterIn.Focused():
			cmd = m.filterIn.Update(msg)
		case m.showDetails:
			cmd = m.details.Update(msg)
		}
	}
	if !m.statusUntil.IsZero() && m.now().After(m.statusUntil) {
		m.status, m.statusUntil = "", time.Time{}
	}
	m.layout()
	return m, cmd
}

// startPoll sends a poll, and reads the simulator and pools beside it.
func (m *Model) startPoll() tea.Cmd {
	if m.opts.Source == nil {
		return nil
	}
	m.phase = phasePolling
	cmds := []tea.Cmd{pollCmd(m.ctx, m.opts.Source)}
	if c := m.readSim(); c != nil {
		cmds = append(cmds, c)
	}
	return tea.Batch(cmds...)
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

// arm schedules the next poll after d.
func (m *Model) arm(d time.Duration) tea.Cmd {
	m.phase = phaseWaiting
	m.seq++
	return m.after(d, tickMsg{seq: m.seq})
}

func (m *Model) onTick(msg tickMsg) tea.Cmd {
	if msg.seq != m.seq || m.phase != phaseWaiting {
		return nil // armed before the interval changed or a refresh was forced
	}
	if m.paused {
		m.phase = phaseIdle
		return nil
	}
	return m.startPoll()
}

// backoff is the wait before reconnect attempt n (1, 2, 4 … 30 seconds).
func backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	return min(d, 30*time.Second)
}

func (m *Model) onSnapshot(msg SnapshotMsg) tea.Cmd {
	ours := m.phase == phasePolling
	if ours {
		m.phase = phaseIdle
	}
	if msg.Err != nil {
		m.failures++
		text := Sanitize(msg.Err.Error())
		delay := backoff(m.failures)
		if m.header.conn != connLost || text != m.header.lastErr {
			m.log.Warn("poll failed", "err", text, "attempt", m.failures, "retry_in", delay)
			m.note(outcomeInfo, "connection lost: "+text)
		}
		m.header.conn, m.header.lastErr, m.header.attempt, m.header.retryIn = connLost, text, m.failures, delay
		if ours {
			return m.arm(delay)
		}
		return nil
	}
	if m.header.conn == connLost {
		m.log.Info("reconnected", "failed_attempts", m.failures)
		m.note(outcomeInfo, "reconnected after "+strconv.Itoa(m.failures)+" failed attempts")
	}
	m.header.conn, m.failures = connOK, 0
	if !m.paused || m.snapOnce {
		m.snapOnce = false
		m.apply(msg.Snapshot)
	}
	if ours && !m.paused {
		return m.arm(m.interval)
	}
	return nil
}

// apply puts a snapshot on screen.
func (m *Model) apply(s model.Snapshot) {
	if m.hasSnap && m.sim == nil {
		m.events.Add(diffEvents(&m.snap, &s)...)
	}
	m.snap, m.hasSnap = s, true
	m.table.SetLocks(m.snap.Locks)
	m.gauges.SetSnapshot(&m.snap, m.table.held, m.table.waiting)
	m.header.latency, m.header.taken = s.Latency, s.Taken
}

func (m *Model) onSim(msg simMsg) {
	m.simBusy = false
	if m.paused && !m.simOnce {
		return
	}
	m.simOnce = false
	m.simp.SetStatus(msg.status, m.now())
	m.gauges.pools = msg.status.Pools
}

func (m *Model) onEvents(msg eventsMsg) tea.Cmd {
	if m.paused {
		m.held = append(m.held, msg.events...)
		if over := len(m.held) - eventCapacity; over > 0 {
			m.held = m.held[over:]
		}
	} else {
		m.events.Add(msg.events...)
	}
	if msg.closed || m.sim == nil {
		return nil
	}
	return waitEvents(m.ctx, m.sim.Events())
}

func (m *Model) onAction(msg actionMsg) tea.Cmd {
	if msg.err != nil {
		text := Sanitize(msg.err.Error())
		m.log.Warn("action failed", "action", msg.note, "err", text)
		m.setStatus(msg.note+": "+text, true)
		return nil
	}
	m.log.Info("action", "what", msg.note)
	m.note(outcomeInfo, msg.note)
	m.setStatus(msg.note, false)
	// Show the action's effect now, paused or not.
	if c := m.readSim(); c != nil {
		m.simOnce = m.paused
		return c
	}
	return nil
}

// note adds the dashboard's own line to the event log.
func (m *Model) note(o model.Outcome, detail string) {
	e := model.Event{Time: m.now(), Worker: "locktop", Outcome: o, Detail: detail}
	if m.paused {
		m.held = append(m.held, e)
		return
	}
	m.events.Add(e)
}

func (m *Model) setStatus(s string, isErr bool) {
	m.status, m.statusErr, m.statusUntil = s, isErr, m.now().Add(statusFor)
}

// action runs fn in a command and reports it as an actionMsg.
func action(note string, fn func() error) tea.Cmd {
	return func() tea.Msg { return actionMsg{note: note, err: fn()} }
}

// outcome runs fn in a command and reports what it says it did.
func outcome(fn func() (note string, err error)) tea.Cmd {
	return func() tea.Msg {
		note, err := fn()
		return actionMsg{note: note, err: err}
	}
}

// pressed reports whether msg is one of b's keys, enabled or not (to
// explain a key that is off).
func pressed(msg tea.KeyPressMsg, b key.Binding) bool {
	s := msg.String()
	for _, k := range b.Keys() {
		if k == s {
			return true
		}
	}
	return false
}

func (m *Model) onKey(msg tea.KeyPressMsg) tea.Cmd {
	k := &m.keys
	if msg.String() == "ctrl+c" {
		return m.quit()
	}
	switch {
	case m.confirm.open:
		switch {
		case key.Matches(msg, k.Confirm):
			m.confirm.open = false
			pid := m.confirm.pid
			term := m.opts.Terminate
			ctx := m.ctx
			m.log.Warn("terminating backend", "pid", pid)
			return action("terminated backend "+strconv.Itoa(int(pid)), func() error {
				ctx, cancel := context.WithTimeout(ctx, pollTimeout)
				defer cancel()
				return term(ctx, pid)
			})
		case key.Matches(msg, k.Cancel):
			m.confirm.open = false
			m.setStatus("not terminated", false)
		}
		return nil
	case m.chooser != nil:
		return m.chooserKey(msg)
	case m.filterIn.Focused():
		switch msg.String() {
		case "enter":
			m.filterIn.Close()
		case "esc":
			m.filterIn.Close()
			m.table.SetFilter("")
		default:
			cmd := m.filterIn.Update(msg)
			m.table.SetFilter(m.filterIn.Value())
			return cmd
		}
		return nil
	case m.showHelp:
		switch {
		case key.Matches(msg, k.Quit):
			return m.quit()
		case key.Matches(msg, k.Close), key.Matches(msg, k.Help):
			m.showHelp = false
		}
		return nil
	case m.showDetails:
		switch {
		case key.Matches(msg, k.Quit):
			return m.quit()
		case key.Matches(msg, k.Close), key.Matches(msg, k.Details):
			m.showDetails = false
			return nil
		}
		return m.details.Update(msg)
	}

	switch {
	case key.Matches(msg, k.Quit):
		return m.quit()
	case key.Matches(msg, k.Help):
		m.showHelp = true
	case key.Matches(msg, k.Pause):
		return m.togglePause()
	case key.Matches(msg, k.Refresh):
		return m.refreshNow()
	case key.Matches(msg, k.Faster):
		return m.stepInterval(-1)
	case key.Matches(msg, k.Slower):
		return m.stepInterval(+1)
	case key.Matches(msg, k.Up):
		m.table.Move(-1)
	case key.Matches(msg, k.Down):
		m.table.Move(1)
	case key.Matches(msg, k.PageUp):
		m.table.Move(-m.table.Page())
	case key.Matches(msg, k.PageDown):
		m.table.Move(m.table.Page())
	case key.Matches(msg, k.Top):
		m.table.MoveTo(0)
	case key.Matches(msg, k.Bottom):
		m.table.MoveTo(-1)
	case key.Matches(msg, k.Details):
		if sel, ok := m.table.Selected(); ok {
			m.details.Open(&m.snap, sel, m.table.db)
			m.showDetails = true
		}
	case key.Matches(msg, k.Filter):
		return m.filterIn.Open(m.table.filter.raw)
	case key.Matches(msg, k.Close):
		if !m.table.filter.empty() {
			m.table.SetFilter("")
			m.setStatus("filter cleared", false)
		}
	case key.Matches(msg, k.Sort):
		m.table.CycleSort()
		m.setStatus("sorted by "+m.table.sort.String(), false)
	case key.Matches(msg, k.Terminate):
		m.askTerminate()
	case pressed(msg, k.Terminate):
		m.setStatus("terminating a backend needs --allow-terminate", true)
	case key.Matches(msg, k.Scenario):
		m.openChooser("Switch scenario", m.scenarios, m.simp.status.Scenario, func(name string) tea.Cmd {
			sim := m.sim
			return action("scenario "+name, func() error { return sim.SetScenario(name) })
		})
	case key.Matches(msg, k.Fault):
		m.openChooser("Inject a fault", m.faults, "", func(name string) tea.Cmd {
			sim := m.sim
			return action("injected fault "+name, func() error { return sim.InjectFault(name) })
		})
	case key.Matches(msg, k.RatesUp):
		return scaleRates(m.sim, 1.25)
	case key.Matches(msg, k.RatesDown):
		return scaleRates(m.sim, 0.8)
	case key.Matches(msg, k.WorkersUp):
		return scaleWorkers(m.sim, 1.25)
	case key.Matches(msg, k.WorkersDown):
		return scaleWorkers(m.sim, 0.8)
	case key.Matches(msg, k.Locks):
		// A toggle, not "set to the opposite of what the screen shows": two
		// quick presses, before the screen shows the first, cancel out.
		sim := m.sim
		return outcome(func() (string, error) {
			if sim.ToggleLocks() {
				return "locks on", nil
			}
			return "locks off: the races are allowed", nil
		})
	case pressed(msg, k.Scenario), pressed(msg, k.Fault), pressed(msg, k.RatesUp),
		pressed(msg, k.RatesDown), pressed(msg, k.WorkersUp), pressed(msg, k.WorkersDown), pressed(msg, k.Locks):
		m.setStatus("no simulator here: run locktop without a DSN, or with --sim", true)
	}
	return nil
}

// scaleRates scales the simulator's rates by factor and says how many it
// changed: a rate without a limit has nothing to scale.
func scaleRates(sim Simulator, factor float64) tea.Cmd {
	what := "rates ×" + strconv.FormatFloat(factor, 'f', -1, 64)
	return outcome(func() (string, error) {
		switch n := sim.ScaleRates(factor); n {
		case 0:
			return what, errors.New("no rate to scale: every rate of this scenario is without a limit")
		default:
			return what + " (" + plural(n, "rate", "rates") + ")", nil
		}
	})
}

// scaleWorkers scales the simulator's worker goroutines by factor.
func scaleWorkers(sim Simulator, factor float64) tea.Cmd {
	return outcome(func() (string, error) {
		n := sim.ScaleWorkers(factor)
		return "workers ×" + strconv.FormatFloat(factor, 'f', -1, 64) + ": " + counted(n, "goroutine", "goroutines"), nil
	})
}

func (m *Model) quit() tea.Cmd {
	m.log.Info("quit")
	return tea.Quit
}

func (m *Model) togglePause() tea.Cmd {
	m.paused = !m.paused
	if m.paused {
		m.setStatus("paused · space resumes", false)
		return nil
	}
	m.setStatus("live", false)
	m.events.Add(m.held...)
	m.held = nil
	if m.phase == phaseIdle {
		return m.startPoll()
	}
	return nil
}

// refreshNow polls at once; paused, it refreshes the screen once.
func (m *Model) refreshNow() tea.Cmd {
	if m.paused {
		m.snapOnce, m.simOnce = true, true
	}
	switch m.phase {
	case phasePolling:
		return nil
	case phaseWaiting:
		m.seq++ // the armed tick is now stale
	}
	return m.startPoll()
}

// stepInterval moves the refresh interval one step faster (-1) or slower.
func (m *Model) stepInterval(dir int) tea.Cmd {
	m.interval = nextInterval(m.interval, dir)
	m.setStatus("refresh every "+fmtInterval(m.interval), false)
	if m.phase == phaseWaiting && m.header.conn != connLost {
		return m.arm(m.interval)
	}
	return nil
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

func (m *Model) askTerminate() {
	sel, ok := m.table.Selected()
	if !ok {
		return
	}
	if sel.PID == 0 {
		m.setStatus("this lock has no backend to terminate", true)
		return
	}
	what := "holds"
	if !sel.Granted {
		what = "waits for"
	}
	m.confirm.pid = sel.PID
	m.confirm.question = "Terminate backend " + strconv.Itoa(int(sel.PID)) + " (" + orDash(Sanitize(sel.ApplicationName)) +
		", " + what + " " + sel.KeyLabel() + ")?\nIts session ends and every lock it holds is released."
	m.confirm.open = true
}

func (m *Model) openChooser(title string, items []string, current string, choose func(string) tea.Cmd) {
	if len(items) == 0 {
		m.setStatus("nothing to choose from", true)
		return
	}
	c := &chooser{st: m.st, title: title, items: items, current: current, choose: choose}
	for i, it := range items {
		if it == current {
			c.cursor = i
		}
	}
	m.chooser = c
}

func (m *Model) chooserKey(msg tea.KeyPressMsg) tea.Cmd {
	c, k := m.chooser, &m.keys
	switch {
	case key.Matches(msg, k.Up):
		c.cursor = max(c.cursor-1, 0)
	case key.Matches(msg, k.Down):
		c.cursor = min(c.cursor+1, len(c.items)-1)
	case key.Matches(msg, k.Choose):
		m.chooser = nil
		return c.choose(c.items[c.cursor])
	case key.Matches(msg, k.Close), key.Matches(msg, k.Quit):
		m.chooser = nil
	}
	return nil
}

// layout gives each component its cells.
func (m *Model) layout() {
	w, h := m.width, m.height
	if w < MinWidth || h < MinHeight {
		return
	}
	m.header.SetSize(w)
	m.gauges.SetSize(w)
	m.filterIn.SetSize(w)
	m.helpOv.SetSize(w, h)
	m.details.SetSize(min(w-4, 140), h-2)
	body := h - m.header.Height() - m.gauges.Height() - 1
	if m.sim != nil && w >= 120 {
		// Wide: the table takes the left side whole; the simulator and
		// under it the event log share the right.
		side := min(max(w*2/5, 48), 72)
		m.simp.SetSize(side, 0) // its height depends on its width
		simH := min(m.simp.Height(), body-4)
		m.table.SetSize(w-side-1, body)
		m.simp.SetSize(side, simH)
		m.events.SetSize(side, body-simH)
		return
	}
	ev := min(max(body/5, 3), 8)
	simH := 0
	if m.sim != nil {
		m.simp.SetSize(w, 0)
		simH = min(max(m.simp.Height(), 5), body*2/5)
	}
	m.table.SetSize(w, body-ev-simH)
	m.simp.SetSize(w, simH)
	m.events.SetSize(w, ev)
}

// View renders the screen.
func (m *Model) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	v.WindowTitle = "locktop"
	if m.header.info.Database != "" {
		v.WindowTitle = "locktop · " + Sanitize(m.header.info.User+"@"+m.header.info.Database)
	}
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
	parts := []string{m.header.View(m.paused, m.interval), m.gauges.View()}
	if m.sim != nil && w >= 120 {
		right := m.simp.View() + "\n" + m.events.View()
		sep := strings.TrimSuffix(strings.Repeat(m.st.Dim.Render("│")+"\n", m.table.height), "\n")
		parts = append(parts, lipgloss.JoinHorizontal(lipgloss.Top, m.table.View(), sep, right))
	} else {
		parts = append(parts, m.table.View())
		if m.sim != nil {
			parts = append(parts, m.simp.View())
		}
		parts = append(parts, m.events.View())
	}
	parts = append(parts, m.footerView())
	base := strings.Join(parts, "\n")
	switch {
	case m.confirm.open:
		return overlay(base, m.confirm.View(w-4), w, h)
	case m.chooser != nil:
		return overlay(base, m.chooser.View(w-4), w, h)
	case m.showHelp:
		return overlay(base, m.helpOv.View(m.keys), w, h)
	case m.showDetails:
		return overlay(base, m.details.View(), w, h)
	}
	return base
}

func (m *Model) footerView() string {
	if m.filterIn.Focused() {
		return m.filterIn.View()
	}
	status := ""
	if m.status != "" {
		st := m.st.Status
		if m.statusErr {
			st = m.st.ErrorMsg
		}
		status = st.Render(m.status)
	}
	sw := ansi.StringWidth(status)
	keys := shortHelp(m.st, m.keys.ShortHelp(), m.width-sw-2)
	gap := max(m.width-ansi.StringWidth(keys)-sw, 1)
	return fitLine(keys+strings.Repeat(" ", gap)+status, m.width)
}

// shortHelp renders the enabled bindings as "key desc • key desc …" in at
// most w cells, whole items only. (bubbles/help's short view lets the last
// items run past its width when the ellipsis does not fit.)
func shortHelp(st *Styles, bindings []key.Binding, w int) string {
	sep := st.Help.ShortSeparator.Render(" • ")
	var b strings.Builder
	used := 0
	for _, kb := range bindings {
		if !kb.Enabled() {
			continue
		}
		h := kb.Help()
		item := st.Help.ShortKey.Render(h.Key) + " " + st.Help.ShortDesc.Render(h.Desc)
		iw := ansi.StringWidth(h.Key) + 1 + ansi.StringWidth(h.Desc)
		if used > 0 {
			iw += 3
			item = sep + item
		}
		if used+iw > w-2 { // room for " …"
			if used > 0 {
				b.WriteString(st.Help.Ellipsis.Render(" …"))
			}
			break
		}
		b.WriteString(item)
		used += iw
	}
	return b.String()
}

func (m *Model) tooSmall() string {
	msg := "locktop needs a terminal of at least " + strconv.Itoa(MinWidth) + "×" + strconv.Itoa(MinHeight) +
		"; this one is " + strconv.Itoa(m.width) + "×" + strconv.Itoa(m.height) + ".\nMake it larger, or press q to quit."
	box := lipgloss.NewStyle().Width(max(m.width-2, 1)).Align(lipgloss.Center).Render(msg)
	return lipgloss.Place(m.width, m.height, lipgloss.Center, lipgloss.Center, box)
}
