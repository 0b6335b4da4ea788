package ui

import (
	"context"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// watchDeadlocks feeds the graph of the snapshot on screen to the
// detector, once per answer of the server (source 0: one poll of every
// source). A deadlock new in this poll is an event and a log line; every
// one is a banner until it ends.
func (m *Model) watchDeadlocks() {
	active, fresh := m.detector.Observe(m.table.graph)
	m.deadlocks = active
	m.header.deadlocks = active
	if m.opts.Deadlocks != nil && len(fresh) > 0 {
		m.opts.Deadlocks(fresh)
	}
	for i := range fresh {
		c := &fresh[i]
		m.log.Warn("deadlock", "kinds", c.KindsLabel(), "cycle", c.Summary())
		m.events.Add(model.Event{Time: m.now(), Worker: "locktop", Outcome: model.OutcomeDeadlock, Key: c.KindsLabel(),
			Detail: "deadlock " + c.Summary()})
	}
}

// deadlockBanner is one line under the header for deadlock c.
func deadlockBanner(c *waitfor.Cycle, k *KeyMap) string {
	names := make([]string, len(c.Sessions))
	for i, x := range c.Sessions {
		names[i] = c.Party(x)
	}
	s := "DEADLOCK " + c.KindsLabel() + ": " + strings.Join(names, " ⇄ ")
	if c.ServerResolves {
		s += " · PostgreSQL will cancel one"
	} else {
		s += " · no server sees it"
	}
	return s + " · " + hint(k.Deadlocks) + " for details"
}

func (m *Model) openDeadlocks() tea.Cmd {
	if len(m.deadlocks) == 0 {
		m.setStatus("no deadlock now: a cycle of waits counts once it is seen in two polls in a row", false)
		return nil
	}
	m.open(newDeadlockView(m, m.deadlocks))
	return nil
}

// deadlockView is the overlay of the deadlocks now: each wait of each
// cycle (kind, key by name, mode, waiting since) and who holds it. With
// --allow-terminate, Terminate offers to break one: end a backend, or
// force-release a Redis lock through its audited path, after a
// confirmation.
type deadlockView struct {
	m      *Model
	cycles []waitfor.Cycle
	box    scrollBox
	short  []key.Binding
}

func newDeadlockView(m *Model, cycles []waitfor.Cycle) *deadlockView {
	k := &m.keys
	v := &deadlockView{m: m, cycles: cycles, box: newScrollBox(m.st, k),
		short: []key.Binding{k.Up, k.Down, with(k.Terminate, "break it"), k.Close, k.Quit}}
	title := "Deadlocks · " + counted(len(cycles), "cycle", "cycles") + " of waits, each seen in two polls in a row"
	v.box.set(title, func(w int) string { return drawDeadlocks(m.st, cycles, w, k.Terminate.Enabled()) })
	return v
}

// drawDeadlocks renders the cycles in w cells a line.
func drawDeadlocks(st *Styles, cycles []waitfor.Cycle, w int, canBreak bool) string {
	var b strings.Builder
	for i := range cycles {
		c := &cycles[i]
		if i > 0 {
			b.WriteByte('\n')
		}
		head := "Cycle " + strconv.Itoa(i+1) + " · " + c.KindsLabel()
		if c.ServerResolves {
			head += " · inside one PostgreSQL server: it will cancel one of them after deadlock_timeout"
		} else {
			head += " · across systems: no server sees it; each waits until its timeout, then may meet the other again"
		}
		b.WriteString(st.Bad.Render(hang(Sanitize(head), w, 2)))
		b.WriteByte('\n')
		for _, e := range c.Edges {
			l := &e.Wait
			line := Sanitize(c.Party(e.From)) + " waits for " + Sanitize(c.Party(e.To))
			b.WriteString("  " + hang(line, w-2, 4))
			b.WriteByte('\n')
			what := "kind " + string(l.Kind) + " · key " + Sanitize(l.KeyLabel()) + " · mode " + Sanitize(modeText(l.Mode))
			if !l.WaitStart.IsZero() {
				what += " · waiting since " + l.WaitStart.Format("15:04:05.000")
			}
			b.WriteString("    " + hang(what, w-4, 6))
			b.WriteByte('\n')
			if h := &e.Held; h.Granted {
				held := "held by " + Sanitize(h.Holder()) + " (" + Sanitize(modeText(h.Mode)) + ")"
				if app := h.Session().ApplicationName; app != "" {
					held += " · " + Sanitize(app)
				}
				b.WriteString("    " + st.Dim.Render(hang(held, w-4, 6)))
				b.WriteByte('\n')
			}
		}
	}
	if canBreak {
		b.WriteString("\n" + st.Dim.Render("T breaks a cycle: end one of its backends, or force-release one of its Redis locks (audited)."))
	} else {
		b.WriteString("\n" + st.Dim.Render("Read-only: --allow-terminate lets this view break a cycle."))
	}
	return strings.TrimRight(b.String(), "\n")
}

// SetSize sets the box's size (the body of the screen).
func (v *deadlockView) SetSize(w, h int) { v.box.SetSize(w, h) }

// View renders the box.
func (v *deadlockView) View() string { return v.box.View() }

// Place covers the body.
func (v *deadlockView) Place() placement { return placeBody }

// ShortHelp is the overlay's keys, for the footer.
func (v *deadlockView) ShortHelp() []key.Binding { return v.short }

// FullHelp is ShortHelp in one column.
func (v *deadlockView) FullHelp() [][]key.Binding { return [][]key.Binding{v.short} }

// Update scrolls, breaks a cycle on Terminate, or closes on esc or the
// key that opened it.
func (v *deadlockView) Update(msg tea.Msg) (bool, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	switch {
	case ok && (key.Matches(k, v.m.keys.Close) || key.Matches(k, v.m.keys.Deadlocks)):
		return false, nil
	case ok && pressed(k, v.m.keys.Terminate):
		if !v.m.keys.Terminate.Enabled() {
			v.m.setStatus("breaking a deadlock needs --allow-terminate", true)
			return true, nil
		}
		v.m.chooseBreak(v.cycles)
		return true, nil // the chooser replaces this overlay
	}
	return true, v.box.Update(msg)
}

// breakAction is one way to break a cycle.
type breakAction struct {
	label, question string
	do              func(ctx context.Context) error
}

// breakActions are the ways to break the cycles: end each PostgreSQL
// backend in them, force-release each Redis lock one of them holds.
func (m *Model) breakActions(cycles []waitfor.Cycle) []breakAction {
	var out []breakAction
	seen := map[string]bool{}
	add := func(a breakAction) {
		if !seen[a.label] {
			seen[a.label] = true
			out = append(out, a)
		}
	}
	for i := range cycles {
		c := &cycles[i]
		for _, e := range c.Edges {
			for _, l := range []model.Lock{e.Wait, e.Held} {
				if l.PID != 0 && m.opts.Terminate != nil {
					pid, term := l.PID, m.opts.Terminate
					add(breakAction{
						label:    "terminate backend " + strconv.Itoa(int(pid)) + " (" + Sanitize(orDash(l.Session().ApplicationName)) + ")",
						question: "Terminate backend " + strconv.Itoa(int(pid)) + "?\nIts session ends and every lock it holds is released; the cycle breaks.",
						do:       func(ctx context.Context) error { return term(ctx, pid) },
					})
				}
			}
			if h := e.Held; h.Kind == model.KindRedis && h.Granted && m.opts.ForceRelease != nil {
				name, force := h.Name, m.opts.ForceRelease
				add(breakAction{
					label:    "force-release Redis " + Sanitize(name) + " (held by " + Sanitize(h.Owner) + ")",
					question: "Force-release Redis lock " + Sanitize(name) + " held by " + Sanitize(h.Owner) + "?\nThe release is audited; its holder finds its lock lost.",
					do:       func(ctx context.Context) error { return force(ctx, name) },
				})
			}
		}
	}
	return out
}

// chooseBreak offers the ways to break the cycles, then asks to confirm.
func (m *Model) chooseBreak(cycles []waitfor.Cycle) {
	acts := m.breakActions(cycles)
	labels := make([]string, len(acts))
	for i, a := range acts {
		labels[i] = a.label
	}
	m.choose("Break a deadlock", labels, "", nil, func(label string) tea.Cmd {
		for _, a := range acts {
			if a.label != label {
				continue
			}
			ctx := m.ctx
			m.open(&confirm{st: m.st, keys: &m.keys, question: a.question,
				yes: func() tea.Cmd {
					m.log.Warn("breaking a deadlock", "action", a.label)
					return func() tea.Msg {
						ctx, cancel := context.WithTimeout(ctx, pollTimeout)
						defer cancel()
						return actionMsg{note: "deadlock: " + a.label, fail: "could not " + a.label, err: a.do(ctx)}
					}
				},
				no: func() { m.setStatus("deadlock left alone", false) },
			})
		}
		return nil
	})
}
