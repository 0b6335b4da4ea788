package ui

import (
	"strings"

	"charm.land/lipgloss/v2"
)

// arrangement is how the body shares the screen.
type arrangement int

const (
	// stacked: the table, the simulator panel and the event log, one
	// under the other, each the full width.
	stacked arrangement = iota
	// sideBySide: the table on the left; on the right the simulator panel
	// over the event log.
	sideBySide
)

// Readable widths of the side panel's parts: the simulator's counters with
// their full column titles, and an event line with its detail whole.
const (
	simReadable    = 64
	eventsReadable = 100
	sideMax        = 110 // beyond this the table gets the rest
)

// layout gives each component its cells, by content: side by side only
// when the table gets what its columns need and the side panel its
// readable width; else stacked. Overlays get the body, or a dialog's room.
func (m *Model) layout() {
	w, h := m.width, m.height
	if w < MinWidth || h < MinHeight {
		return
	}
	m.header.SetSize(w, 0)
	m.gauges.SetSize(w, 0)
	m.footer.SetSize(w, 1)
	body := h - m.header.Height() - m.gauges.Height() - 1
	if m.replay != nil {
		m.replay.SetSize(w, 1)
		body-- // the timeline
	}
	m.lay = stacked
	need := 0 // the table's, beside a side panel
	if m.sim != nil {
		need = m.table.need()
	}
	switch {
	case m.sim == nil:
		tbl := m.tableShare(body)
		m.table.SetSize(w, tbl)
		m.events.SetSize(w, body-tbl)
	case need+1+max(simReadable, eventsReadable) <= w:
		m.lay = sideBySide
		side := min(w-need-1, sideMax)
		m.simp.SetSize(side, 0) // its height depends on its width
		simH := min(m.simp.Height(), body-4)
		m.table.SetSize(w-side-1, body)
		m.simp.SetSize(side, simH)
		m.events.SetSize(side, body-simH)
	default:
		m.simp.SetSize(w, 0)
		simH := min(max(m.simp.Height(), 5), body*2/5)
		tbl := m.tableShare(body - simH)
		m.table.SetSize(w, tbl)
		m.simp.SetSize(w, simH)
		m.events.SetSize(w, body-simH-tbl)
	}
	if o := m.overlay; o != nil {
		switch o.Place() {
		case placeBody:
			o.SetSize(w, h-2)
		case placeFooter:
			o.SetSize(w, 1)
		default:
			o.SetSize(w-4, h-2)
		}
	}
}

// tableShare is the lines the table gets of room shared with the event
// log under it: the log its usual fifth (3 to 8 lines) when the table's
// rows fit beside it, else the table its rows and the log what is left,
// its title and newest line at least. An empty log takes no room.
func (m *Model) tableShare(room int) int {
	if m.events.total == 0 {
		return room
	}
	events := min(max(room/5, 3), 8)
	if need := m.table.tall(); need > room-events {
		events = max(room-need, 2)
	}
	return max(room-events, 0)
}

// body renders the table, the simulator panel and the event log as
// arranged.
func (m *Model) body() string {
	if m.lay == sideBySide {
		right := m.simp.View()
		if m.events.height > 0 {
			right += "\n" + m.events.View()
		}
		sep := strings.TrimSuffix(strings.Repeat(m.st.Dim.Render("│")+"\n", m.table.height), "\n")
		return lipgloss.JoinHorizontal(lipgloss.Top, m.table.View(), sep, right)
	}
	parts := []string{m.table.View()}
	if m.sim != nil {
		parts = append(parts, m.simp.View())
	}
	if m.events.height > 0 {
		parts = append(parts, m.events.View())
	}
	return strings.Join(parts, "\n")
}
