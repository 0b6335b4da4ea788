package ui

import (
	"strings"

	"charm.land/lipgloss/v2"
)

// arrangement is how the body shares the screen.
type arrangement int

const (
	// stacked: the table, the simulator panel and the event log, one
	// under the other, each the full width. It is the zero arrangement,
	// which the code never names.
	//lint:ignore U1000 named for readers: the arrangement chosen when sideBySide is not
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

// tableReadable is the least width the table is given beside a side
// panel, whatever its rows need now: an empty table does not send the
// panels side by side (which thus needs about 180 columns).
const tableReadable = 80

// bodyShape is how the body is shared: the arrangement, the side panel's
// width, and the lines of the table and of the simulator panel. It
// follows the content, held still by steady.
type bodyShape struct {
	lay         arrangement
	body        int // the lines shared: another height is a resize
	side        int
	table, simH int
}

// layout gives each component its cells, by content: side by side only
// when the table gets what its columns need and the side panel its
// readable width; else stacked. Overlays get the body, or a dialog's room.
// What follows the content (the arrangement, the shares, the table's
// columns, the gauges' rows) changes on a resize at once, otherwise only
// when the content has wanted the change for settle.
func (m *Model) layout() {
	w, h := m.width, m.height
	if w < MinWidth || h < MinHeight {
		return
	}
	now := m.now()
	fresh := w != m.laidW || h != m.laidH
	m.laidW, m.laidH = w, h
	m.header.SetSize(w, 0)
	m.gauges.SetSize(w, 0)
	m.footer.SetSize(w, 1)
	m.gauges.kindRow = m.kindRow.hold(m.gauges.byKind(), now, fresh)
	m.gauges.dbRow = m.dbRow.hold(m.gauges.byDatabase(), now, fresh)
	m.gauges.servers = countServers(&m.merged, &m.header) // after every update: a feed that fails merges nothing
	var want bodyShape
	body := h - m.header.Height() - m.gauges.Height() - 1
	if m.replay != nil {
		m.replay.SetSize(w, 1)
		body-- // the timeline
	}
	need := 0 // the table's, beside a side panel
	if m.sim != nil {
		need = max(m.table.need(), tableReadable)
	}
	switch {
	case m.sim == nil:
		m.table.SetSize(w, body)
		want.table = m.tableShare(body)
	case need+1+max(simReadable, eventsReadable) <= w:
		want.lay = sideBySide
		want.side = min(w-need-1, sideMax)
		m.simp.SetSize(want.side, 0) // its height depends on its width
		want.simH = min(m.simp.Height(), body-4)
		want.table = body
	default:
		m.simp.SetSize(w, 0)
		// The table is what is read: the panel gets a quarter of the body,
		// its rates and invariants at least (two fifths at most).
		want.simH = min(max(min(m.simp.Height(), body/4), m.simp.summaryHeight(), 5), body*2/5)
		m.table.SetSize(w, body-want.simH)
		want.table = m.tableShare(body - want.simH)
	}
	want.body = body
	// A panel that fills for the first time (the event log) cannot flip
	// back: it is taken at once; so is another height of the body (a
	// banner, a pool's gauge).
	fresh = fresh || (m.events.total > 0) != m.hadEvents || m.shapes.cur.body != body
	m.hadEvents = m.events.total > 0
	got := m.shapes.hold(want, now, fresh)
	m.lay = got.lay
	switch {
	case got.lay == sideBySide:
		m.table.SetSize(w-got.side-1, body)
		m.simp.SetSize(got.side, got.simH)
		m.events.SetSize(got.side, body-got.simH)
	case m.sim == nil:
		m.table.SetSize(w, got.table)
		m.events.SetSize(w, body-got.table)
	default:
		m.table.SetSize(w, got.table)
		m.simp.SetSize(w, got.simH)
		m.events.SetSize(w, body-got.simH-got.table)
	}
	m.table.settle(now, fresh)
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
// its title at least (which counts the events). An empty log takes no room.
func (m *Model) tableShare(room int) int {
	if m.events.total == 0 {
		return room
	}
	events := min(max(room/5, 3), 8)
	if need := m.table.tall(); need > room-events && need < room {
		// The rows fit if the log gives way, to its title (which counts
		// the events); a table that scrolls anyway leaves it its share.
		events = room - need
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
