package ui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// component is the contract every part of the screen keeps (soft-serve's
// and gh-dash's shape): it is given its cells, renders into exactly them,
// and names the keys it answers to as a help.KeyMap, which the footer and
// the help overlay render. A part with no keys of its own embeds noKeys.
type component interface {
	// SetSize gives the component its cells. A component whose height
	// follows its content also has Height, the lines it would like.
	SetSize(w, h int)
	// View renders the component in exactly its cells.
	View() string
	help.KeyMap
}

// noKeys is the help.KeyMap of a component without keys.
type noKeys struct{}

// ShortHelp is empty.
func (noKeys) ShortHelp() []key.Binding { return nil }

// FullHelp is empty.
func (noKeys) FullHelp() [][]key.Binding { return nil }

// overlay is a component drawn over the screen that has the keys while it
// is open: the help, the details of a lock, the filter's editor, the
// confirmation and the pickers. The model holds at most one, in one field;
// q quits from every one of them except one that takes text (typist).
type overlay interface {
	component
	// Update handles a message while the overlay is open and reports
	// whether it stays open.
	Update(msg tea.Msg) (open bool, cmd tea.Cmd)
	// Place says where the overlay is drawn.
	Place() placement
}

// typist is an overlay that takes text: every key but ctrl+c is its own,
// q included.
type typist interface{ Typing() bool }

// placement is where an overlay is drawn.
type placement int

const (
	// placeCenter: a dialog, centred over the dimmed screen.
	placeCenter placement = iota
	// placeBody: everything between the header's first line and the
	// footer, edge to edge, so that nothing of the screen under it shows
	// beside it.
	placeBody
	// placeFooter: the footer line (the filter's editor), the screen
	// staying live above it.
	placeFooter
)

// takesText reports whether o takes every key as text.
func takesText(o overlay) bool {
	t, ok := o.(typist)
	return ok && t.Typing()
}

// compose draws box over base at (x, y); base stays around it, stripped of
// its colours and dimmed, so the box reads as the one thing in front.
func compose(st *Styles, base, box string, x, y, w, h int) string {
	lines := strings.Split(base, "\n")
	dim := paintOf(st.Dim)
	for i, l := range lines {
		lines[i] = dim.on(ansi.Strip(l))
	}
	out := lipgloss.NewCompositor(
		lipgloss.NewLayer(strings.Join(lines, "\n")),
		lipgloss.NewLayer(box).X(x).Y(y).Z(1),
	).Render()
	// The compositor trims trailing blanks; keep the frame exact.
	return fitBlock(strings.Split(out, "\n"), w, h)
}

// centre returns where a box of bw×bh sits centred in w×h.
func centre(bw, bh, w, h int) (x, y int) {
	return max((w-bw)/2, 0), max((h-bh)/2, 0)
}

// Every part of the screen keeps the contract; every overlay is one.
var (
	_ component = (*header)(nil)
	_ component = (*gauges)(nil)
	_ component = (*lockTable)(nil)
	_ component = (*simPanel)(nil)
	_ component = (*eventLog)(nil)
	_ component = (*footer)(nil)

	_ overlay = (*helpOverlay)(nil)
	_ overlay = (*details)(nil)
	_ overlay = (*forest)(nil)
	_ overlay = (*filterInput)(nil)
	_ overlay = (*confirm)(nil)
	_ overlay = (*chooser)(nil)
	_ typist  = (*filterInput)(nil)
)
