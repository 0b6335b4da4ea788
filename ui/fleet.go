package ui

import (
	"slices"
	"strconv"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// Several targets in one pane (Options.Targets): each source's name says
// whose it is ("b/postgres", "b/redis"), each lock carries its target
// (model.Lock.Server). The table has a SERVER column and a server:NAME
// filter, the header a line that sums the targets up, and the Server key
// shows one target at a time. A target that fails has its own banner, as
// every source has, while the others go on.

// setTargets takes the targets from the options, or in a replay from the
// recorded sources' names.
func (m *Model) setTargets() {
	targets := m.opts.Targets
	if m.opts.Replay != nil {
		targets = nil
		for _, name := range m.opts.Replay.Sources() {
			if sv, _ := model.SplitSource(name); sv != "" && !slices.Contains(targets, sv) {
				targets = append(targets, sv)
			}
		}
	}
	if len(targets) < 2 {
		return
	}
	m.header.targets = targets
	m.keys.Server.SetEnabled(true)
}

// nextServer shows the next target alone (server:NAME), after the last
// every target again.
func (m *Model) nextServer() tea.Cmd {
	targets := m.header.targets
	next := ""
	if cur, ok := strings.CutPrefix(m.table.filter.raw, "server:"); ok {
		if i := slices.Index(targets, cur); i >= 0 && i+1 < len(targets) {
			next = targets[i+1]
		}
	} else if len(targets) > 0 {
		next = targets[0]
	}
	if next == "" {
		m.table.SetFilter("")
		m.setStatus("every server", false)
		return nil
	}
	m.table.SetFilter("server:" + next)
	m.setStatus("server "+next+" alone ("+hint(m.keys.Server)+": the next)", false)
	return nil
}

// countWaits counts the waiters of each target, for the header's line.
func (m *Model) countWaits() {
	if len(m.header.targets) == 0 {
		return
	}
	w := make(map[string]int, len(m.header.targets))
	for i := range m.merged.Locks {
		if l := &m.merged.Locks[i]; !l.Granted {
			w[l.Server]++
		}
	}
	m.header.waits = w
}

// fleetLine sums the targets up in one line: how many answer, which do
// not, who has waiters, and which one the table shows.
func (h *header) fleetLine() string {
	var up, connecting int
	var down []string
	for _, name := range h.targets {
		switch h.serverState(name) {
		case connOK:
			up++
		case connLost:
			down = append(down, name)
		default:
			connecting++
		}
	}
	segs := []string{strconv.Itoa(len(h.targets)) + " servers", strconv.Itoa(up) + " up"}
	if len(down) > 0 {
		segs = append(segs, strconv.Itoa(len(down))+" down ("+strings.Join(down, ", ")+")")
	}
	if connecting > 0 {
		segs = append(segs, strconv.Itoa(connecting)+" connecting")
	}
	total, by := 0, []string{}
	for _, name := range h.targets {
		if n := h.waits[name]; n > 0 {
			total += n
			by = append(by, name+" "+strconv.Itoa(n))
		}
	}
	if total > 0 {
		segs = append(segs, strconv.Itoa(total)+" waiting ("+strings.Join(by, ", ")+")")
	} else {
		segs = append(segs, "none waiting")
	}
	return " " + strings.Join(segs, " · ")
}

// serverState is how target name's server answers, from its feed (the
// one named "NAME/postgres").
func (h *header) serverState(name string) connState {
	for _, f := range h.poll.feeds {
		if sv, src := model.SplitSource(f.name); sv == name && src == "postgres" {
			return f.conn
		}
	}
	return connConnecting
}
