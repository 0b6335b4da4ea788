package ui

import (
	"strings"

	"charm.land/bubbles/v2/help"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
)

// helpOverlay is the full help: every key from the keymap, grouped, and
// what the screen's colours and signs mean.
type helpOverlay struct {
	st   *Styles
	help help.Model
	w, h int
}

func newHelpOverlay(st *Styles) helpOverlay {
	h := help.New()
	h.Styles = st.Help
	h.ShowAll = true
	return helpOverlay{st: st, help: h}
}

// SetSize sets the room the overlay may use (the whole screen).
func (o *helpOverlay) SetSize(w, h int) {
	o.w, o.h = w, h
	o.help.SetWidth(max(w-6, 20))
}

// View renders the box for keymap k.
func (o *helpOverlay) View(k KeyMap) string {
	legend := []string{
		"",
		o.st.Section.Render("Reading the table"),
		"Each key shows its holder first, then its waiters in queue order",
		"(by pg_locks.waitstart). BLOCKED BY names the holders only.",
		"Held times are \"≥\": PostgreSQL does not record when a lock was granted.",
		"Waits turn " + o.st.TimeWarn.Render("yellow from "+fmtDur(waitWarn)) + " and " +
			o.st.TimeCrit.Render("red from "+fmtDur(waitCrit)) + " (! and !! without colour).",
		"Filter: text matches key, application or pid; ns:, app:, pid: narrow",
		"it; a match keeps its whole queue.",
	}
	body := o.st.Section.Render("Keys") + "\n" + o.help.View(k) + "\n" + strings.Join(legend, "\n") +
		"\n\n" + o.st.Dim.Render("esc or ? closes · q quits")
	return o.st.Box.MaxWidth(o.w).MaxHeight(o.h).Render(body)
}

// confirm is a yes/no question; only y answers yes.
type confirm struct {
	st       *Styles
	question string
	pid      int32 // the backend to terminate
	open     bool
}

// View renders the dialog.
func (c *confirm) View(w int) string {
	body := c.st.Bold.Render(c.question) + "\n\n" + c.st.Dim.Render("y terminate · n or esc keep it")
	return c.st.Dialog.MaxWidth(w).Render(body)
}

// chooser picks one of a few names (a scenario, a fault).
type chooser struct {
	st      *Styles
	title   string
	items   []string
	current string // marked as the one in effect, if any
	cursor  int
	choose  func(name string) tea.Cmd // the action for the chosen name
}

// View renders the list.
func (c *chooser) View(w int) string {
	lines := []string{c.st.Section.Render(c.title), ""}
	for i, it := range c.items {
		mark := "  "
		if i == c.cursor {
			mark = "› "
		}
		line := mark + Sanitize(it)
		if it == c.current {
			line += c.st.Dim.Render("  (current)")
		}
		if i == c.cursor {
			line = c.st.Selected.Render(line)
		}
		lines = append(lines, line)
	}
	lines = append(lines, "", c.st.Dim.Render("↑/↓ move · enter choose · esc cancel"))
	return c.st.Box.MaxWidth(w).Render(strings.Join(lines, "\n"))
}

// overlay draws box centred over base, which stays visible around it.
func overlay(base, box string, w, h int) string {
	bw, bh := lipgloss.Size(box)
	x, y := max((w-bw)/2, 0), max((h-bh)/2, 0)
	out := lipgloss.NewCompositor(
		lipgloss.NewLayer(base),
		lipgloss.NewLayer(box).X(x).Y(y).Z(1),
	).Render()
	// The compositor trims trailing blanks; keep the frame exact.
	return fitBlock(strings.Split(out, "\n"), w, h)
}
