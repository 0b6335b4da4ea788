package ui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// The palette is the terminal's own 16 colours, so the dashboard follows the
// user's theme on light and dark backgrounds alike. Bubble Tea downsamples
// them away when NO_COLOR is set; what colour says is then also said with
// bold text or a marker (see Styles.Marks).
var (
	colRed     = lipgloss.Color("1")
	colGreen   = lipgloss.Color("2")
	colYellow  = lipgloss.Color("3")
	colBlue    = lipgloss.Color("4")
	colMagenta = lipgloss.Color("5")
	colCyan    = lipgloss.Color("6")
	colGrey    = lipgloss.Color("8")
	colBrRed   = lipgloss.Color("9")
	colWhite   = lipgloss.Color("15")
)

// Styles are every style the dashboard uses, in one place.
type Styles struct {
	App      lipgloss.Style // the "locktop" mark in the header
	Dim      lipgloss.Style
	Bold     lipgloss.Style
	Section  lipgloss.Style // a section's title
	ColHead  lipgloss.Style // a table's column titles
	Selected lipgloss.Style // the selected row, whole
	Key      lipgloss.Style // a lock key's label
	Tree     lipgloss.Style // the ├ └ that hang waiters under their holder

	Live, Paused     lipgloss.Style
	Connected, Lost  lipgloss.Style
	Banner, Warning  lipgloss.Style
	Status, ErrorMsg lipgloss.Style

	Holds, Waits               lipgloss.Style
	IdleTx                     lipgloss.Style // a holder idle in a transaction
	Root                       lipgloss.Style // a root blocker and its cost
	TimeOK, TimeWarn, TimeCrit lipgloss.Style

	GaugeOK, GaugeWarn, GaugeCrit, GaugeEmpty lipgloss.Style

	Good, Bad, Note lipgloss.Style // invariant status and outcome colours

	Box, Dialog lipgloss.Style // overlays: help, details, chooser; confirm

	Help help.Styles

	// Marks says that colour is not shown (NO_COLOR, or a terminal without
	// colour): what colour says is then said with a marker too.
	Marks bool
}

// DefaultStyles returns the dashboard's styles.
func DefaultStyles() Styles {
	s := Styles{
		App:      lipgloss.NewStyle().Bold(true).Foreground(colCyan),
		Dim:      lipgloss.NewStyle().Foreground(colGrey),
		Bold:     lipgloss.NewStyle().Bold(true),
		Section:  lipgloss.NewStyle().Bold(true).Foreground(colBlue),
		ColHead:  lipgloss.NewStyle().Bold(true).Underline(true),
		Selected: lipgloss.NewStyle().Reverse(true),
		Key:      lipgloss.NewStyle().Bold(true),
		Tree:     lipgloss.NewStyle().Foreground(colGrey),

		Live:      lipgloss.NewStyle().Bold(true).Foreground(colGreen),
		Paused:    lipgloss.NewStyle().Bold(true).Reverse(true).Foreground(colYellow),
		Connected: lipgloss.NewStyle().Foreground(colGreen),
		Lost:      lipgloss.NewStyle().Bold(true).Foreground(colBrRed),
		Banner:    lipgloss.NewStyle().Bold(true).Foreground(colWhite).Background(colRed),
		Warning:   lipgloss.NewStyle().Foreground(colYellow),
		Status:    lipgloss.NewStyle().Foreground(colCyan),
		ErrorMsg:  lipgloss.NewStyle().Bold(true).Foreground(colBrRed),

		Holds:    lipgloss.NewStyle().Foreground(colGreen),
		Waits:    lipgloss.NewStyle().Foreground(colYellow),
		IdleTx:   lipgloss.NewStyle().Bold(true).Foreground(colYellow),
		Root:     lipgloss.NewStyle().Bold(true).Foreground(colMagenta),
		TimeOK:   lipgloss.NewStyle(),
		TimeWarn: lipgloss.NewStyle().Foreground(colYellow),
		TimeCrit: lipgloss.NewStyle().Bold(true).Foreground(colBrRed),

		GaugeOK:    lipgloss.NewStyle().Foreground(colGreen),
		GaugeWarn:  lipgloss.NewStyle().Foreground(colYellow),
		GaugeCrit:  lipgloss.NewStyle().Foreground(colBrRed),
		GaugeEmpty: lipgloss.NewStyle().Foreground(colGrey),

		Good: lipgloss.NewStyle().Foreground(colGreen),
		Bad:  lipgloss.NewStyle().Bold(true).Foreground(colBrRed),
		Note: lipgloss.NewStyle().Foreground(colMagenta),

		Box:    lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(colBlue).Padding(0, 1),
		Dialog: lipgloss.NewStyle().Border(lipgloss.DoubleBorder()).BorderForeground(colBrRed).Padding(0, 1),
	}
	s.Help = help.Styles{
		ShortKey:       lipgloss.NewStyle().Bold(true),
		ShortDesc:      lipgloss.NewStyle().Foreground(colGrey),
		ShortSeparator: lipgloss.NewStyle().Foreground(colGrey),
		Ellipsis:       lipgloss.NewStyle().Foreground(colGrey),
		FullKey:        lipgloss.NewStyle().Bold(true),
		FullDesc:       lipgloss.NewStyle(),
		FullSeparator:  lipgloss.NewStyle(),
	}
	return s
}

// paint is a style reduced to the escape codes around its text, for the
// table's cells: lipgloss's Render measures and pads, which is more than a
// cell needs and costs a few microseconds a call, fifty cells a frame.
// Only for styles of colour and attributes, never of size or padding.
type paint struct{ pre, post string }

func paintOf(st lipgloss.Style) paint {
	out := st.Render("X")
	i := strings.LastIndex(out, "X")
	if i < 0 {
		return paint{}
	}
	return paint{pre: out[:i], post: out[i+1:]}
}

// on paints s.
func (p paint) on(s string) string {
	if p.pre == "" && p.post == "" {
		return s
	}
	return p.pre + s + p.post
}
