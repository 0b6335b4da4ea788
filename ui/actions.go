package ui

import (
	"context"
	"errors"
	"strconv"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// binding ties a key of the main screen to what it does; off, when not "",
// is said when the key is pressed while it is disabled.
type binding struct {
	key *key.Binding
	do  func() tea.Cmd
	off string
}

// noSim is what a simulator key says without a simulator.
const noSim = "no simulator here: run locktop without a DSN, or with --sim"

// bindings are the main screen's keys beside the table's own (lockTable.onKey).
func (m *Model) bindings() []binding {
	k := &m.keys
	if m.replay != nil {
		return m.replayBindings()
	}
	return []binding{
		{key: &k.Quit, do: m.quit},
		{key: &k.Help, do: func() tea.Cmd { m.open(newHelpOverlay(m.st, k, m.screen)); return nil }},
		{key: &k.Pause, do: m.togglePause},
		{key: &k.Refresh, do: m.refreshNow},
		{key: &k.Faster, do: func() tea.Cmd { return m.stepInterval(-1) }},
		{key: &k.Slower, do: func() tea.Cmd { return m.stepInterval(+1) }},
		{key: &k.Details, do: m.openDetails},
		{key: &k.Forest, do: m.openForest},
		{key: &k.Deadlocks, do: m.openDeadlocks},
		{key: &k.Filter, do: m.openFilter},
		{key: &k.Server, do: m.nextServer, off: "one server: with several (--target) this shows each in turn"},
		{key: &k.Terminate, do: m.askTerminate, off: "terminating a backend needs --allow-terminate"},
		{key: &k.Scenario, do: m.chooseScenario, off: noSim},
		{key: &k.Fault, do: m.chooseFault, off: noSim},
		{key: &k.RatesUp, do: func() tea.Cmd { return scaleRates(m.sim, 1.25) }, off: noSim},
		{key: &k.RatesDown, do: func() tea.Cmd { return scaleRates(m.sim, 0.8) }, off: noSim},
		{key: &k.WorkersUp, do: func() tea.Cmd { return scaleWorkers(m.sim, 1.25) }, off: noSim},
		{key: &k.WorkersDown, do: func() tea.Cmd { return scaleWorkers(m.sim, 0.8) }, off: noSim},
		{key: &k.Locks, do: func() tea.Cmd { return toggleLocks(m.sim) }, off: noSim},
		{key: &k.Rewind, do: m.rewind, off: "no history to rewind (--history-keep 0)"},
	}
}

// replayBindings are the main screen's keys in a replay: the timeline's
// instead of the refresh loop's, no simulator, nothing to terminate.
func (m *Model) replayBindings() []binding {
	k := &m.keys
	nothing := func() tea.Cmd { return nil } // disabled here: only their "off" is said
	return []binding{
		{key: &k.Quit, do: m.quit},
		{key: &k.Help, do: func() tea.Cmd { m.open(newHelpOverlay(m.st, k, m.screen)); return nil }},
		{key: &k.Pause, do: m.replayPlay},
		{key: &k.Live, do: m.backToLive},
		{key: &k.StepBack, do: func() tea.Cmd { return m.replayStep(-1) }},
		{key: &k.StepForward, do: func() tea.Cmd { return m.replayStep(+1) }},
		{key: &k.Seek, do: m.openSeek},
		{key: &k.Faster, do: func() tea.Cmd { return m.replaySpeed(+1) }},
		{key: &k.Slower, do: func() tea.Cmd { return m.replaySpeed(-1) }},
		{key: &k.Details, do: m.openDetails},
		{key: &k.Forest, do: m.openForest},
		{key: &k.Deadlocks, do: m.openDeadlocks},
		{key: &k.Filter, do: m.openFilter},
		{key: &k.Server, do: m.nextServer},
		{key: &k.Terminate, do: nothing, off: "a replay cannot terminate a backend" + m.liveHint()},
		{key: &k.Refresh, do: nothing, off: "a replay does not refresh: " + hint(k.StepForward) + " steps forward" + m.liveHint()},
		{key: &k.Scenario, do: nothing, off: noSim},
		{key: &k.Fault, do: nothing, off: noSim},
		{key: &k.Locks, do: nothing, off: noSim},
	}
}

// liveHint tells a rewound dashboard's operator the way back.
func (m *Model) liveHint() string {
	if m.rewound == nil {
		return ""
	}
	return "; " + hint(m.keys.Live) + " returns to live"
}

func (m *Model) togglePause() tea.Cmd {
	cmd := m.poll.togglePause()
	if m.poll.paused {
		m.setStatus("paused · "+hint(m.keys.Pause)+" resumes", false)
		return nil
	}
	m.setStatus("live", false)
	m.events.Add(m.held...)
	m.held = nil
	return cmd
}

// refreshNow polls at once; paused, it refreshes the screen once.
func (m *Model) refreshNow() tea.Cmd {
	if m.poll.paused {
		m.simOnce = true
	}
	return m.poll.refreshNow()
}

// stepInterval moves the refresh interval one step faster (-1) or slower.
func (m *Model) stepInterval(dir int) tea.Cmd {
	cmd := m.poll.step(dir)
	m.setStatus("refresh every "+fmtInterval(m.poll.interval), false)
	return cmd
}

func (m *Model) openForest() tea.Cmd {
	m.open(newForest(m.st, &m.keys, m.merged))
	return nil
}

func (m *Model) openDetails() tea.Cmd {
	if sel, ok := m.table.Selected(); ok {
		m.open(newDetails(m.st, &m.keys, m.merged, *sel, m.table.db, m.beats.of(sel)))
	}
	return nil
}

func (m *Model) openFilter() tea.Cmd {
	f, cmd := newFilterInput(m.st, &m.keys, m.table.filter.raw, m.table.SetFilter)
	m.open(f)
	return cmd
}

func (m *Model) askTerminate() tea.Cmd {
	sel, ok := m.table.Selected()
	if !ok {
		return nil
	}
	if sel.PID == 0 {
		m.setStatus("this lock has no backend to terminate", true)
		return nil
	}
	what := "holds"
	if !sel.Granted {
		what = "waits for"
	}
	pid, term, ctx := sel.PID, m.opts.Terminate, m.ctx
	m.open(&confirm{st: m.st, keys: &m.keys,
		question: "Terminate backend " + strconv.Itoa(int(pid)) + " (" + orDash(Sanitize(sel.Session().ApplicationName)) +
			", " + what + " " + sel.KeyLabel() + ")?\nIts session ends and every lock it holds is released.",
		yes: func() tea.Cmd {
			m.log.Warn("terminating backend", "pid", pid)
			return func() tea.Msg {
				ctx, cancel := context.WithTimeout(ctx, pollTimeout)
				defer cancel()
				return actionMsg{note: "terminated backend " + strconv.Itoa(int(pid)),
					fail: "could not terminate backend " + strconv.Itoa(int(pid)), err: term(ctx, pid), terminated: pid}
			}
		},
		no: func() { m.setStatus("not terminated", false) },
	})
	return nil
}

func (m *Model) chooseScenario() tea.Cmd {
	sim := m.sim
	var describe func(string) string
	if d, ok := sim.(Describer); ok {
		describe = d.DescribeScenario
	}
	return m.choose("Switch scenario", m.scenarios, m.simp.status.Scenario, describe, func(name string) tea.Cmd {
		return action("scenario "+name, func() error { return sim.SetScenario(name) })
	})
}

func (m *Model) chooseFault() tea.Cmd {
	sim := m.sim
	var describe func(string) string
	if d, ok := sim.(Describer); ok {
		describe = d.DescribeFault
	}
	return m.choose("Inject a fault", m.faults, "", describe, func(name string) tea.Cmd {
		return action("injected fault "+name, func() error { return sim.InjectFault(name) })
	})
}

func (m *Model) choose(title string, items []string, current string, describe func(string) string, then func(string) tea.Cmd) tea.Cmd {
	if len(items) == 0 {
		m.setStatus("nothing to choose from", true)
		return nil
	}
	c := newChooser(m.st, &m.keys, title, items, current, then)
	c.describe = describe
	m.open(c)
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

// toggleLocks is a toggle, not "set to the opposite of what the screen
// shows": two quick presses, before the screen shows the first, cancel out.
func toggleLocks(sim Simulator) tea.Cmd {
	return outcome(func() (string, error) {
		if sim.ToggleLocks() {
			return "locks on", nil
		}
		return "locks off: the races are allowed", nil
	})
}

// screenKeys is the help.KeyMap of the main screen: the keys of each
// component, a column or two each, and the screen's own.
type screenKeys struct{ m *Model }

// ShortHelp is the footer's keys.
func (s screenKeys) ShortHelp() []key.Binding { return s.m.keys.ShortHelp() }

// FullHelp is every component's keys.
func (s screenKeys) FullHelp() [][]key.Binding {
	m := s.m
	var out [][]key.Binding
	parts := []help.KeyMap{&m.table, &m.header, &m.simp, m.keys}
	if m.replay != nil {
		parts = []help.KeyMap{&m.table, m.replay, m.keys}
	}
	for _, c := range parts {
		out = append(out, c.FullHelp()...)
	}
	return out
}
