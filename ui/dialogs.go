package ui

import (
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
)

// confirm is a yes/no question: only the Confirm key answers yes.
type confirm struct {
	st       *Styles
	keys     *KeyMap
	question string
	yes      func() tea.Cmd // what yes does
	no       func()         // what no does
	w        int
}

// SetSize sets the room the dialog may use.
func (c *confirm) SetSize(w, _ int) { c.w = w }

// View renders the dialog, as wide as its question.
func (c *confirm) View() string {
	return c.st.Dialog.MaxWidth(c.w).Render(c.st.Bold.Render(c.question))
}

// Place centres the dialog.
func (c *confirm) Place() placement { return placeCenter }

// ShortHelp is the answers.
func (c *confirm) ShortHelp() []key.Binding {
	return []key.Binding{c.keys.Confirm, c.keys.Cancel, c.keys.Quit}
}

// FullHelp is ShortHelp in one column.
func (c *confirm) FullHelp() [][]key.Binding { return [][]key.Binding{c.ShortHelp()} }

// Update answers on y (yes) or n and esc (no); any other key leaves the
// question open.
func (c *confirm) Update(msg tea.Msg) (bool, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	switch {
	case !ok:
		return true, nil
	case key.Matches(k, c.keys.Confirm):
		return false, c.yes()
	case key.Matches(k, c.keys.Cancel):
		c.no()
		return false, nil
	}
	return true, nil
}

// chooser picks one of a few names (a scenario, a fault).
type chooser struct {
	st      *Styles
	keys    *KeyMap
	title   string
	items   []string
	current string // marked as the one in effect, if any
	cursor  int
	choose  func(name string) tea.Cmd // the action for the chosen name
	// describe, if not nil, says what an item runs and what to watch
	// for: shown under the list for the highlighted one.
	describe func(name string) string
	w        int
}

func newChooser(st *Styles, k *KeyMap, title string, items []string, current string, choose func(string) tea.Cmd) *chooser {
	c := &chooser{st: st, keys: k, title: title, items: items, current: current, choose: choose}
	for i, it := range items {
		if it == current {
			c.cursor = i
		}
	}
	return c
}

// SetSize sets the room the list may use.
func (c *chooser) SetSize(w, _ int) { c.w = w }

// View renders the list.
func (c *chooser) View() string {
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
	if c.describe != nil && len(c.items) > 0 {
		if d := Sanitize(c.describe(c.items[c.cursor])); d != "" {
			lines = append(lines, "")
			for _, l := range wrap(d, max(min(c.w-4, 72), 20)) {
				lines = append(lines, c.st.Dim.Render(l))
			}
		}
	}
	return c.st.Box.MaxWidth(c.w).Render(strings.Join(lines, "\n"))
}

// Place centres the list.
func (c *chooser) Place() placement { return placeCenter }

// ShortHelp is the list's keys.
func (c *chooser) ShortHelp() []key.Binding {
	return []key.Binding{c.keys.Up, c.keys.Down, c.keys.Choose, with(c.keys.Close, "cancel"), c.keys.Quit}
}

// FullHelp is ShortHelp in one column.
func (c *chooser) FullHelp() [][]key.Binding { return [][]key.Binding{c.ShortHelp()} }

// Update moves, chooses or cancels.
func (c *chooser) Update(msg tea.Msg) (bool, tea.Cmd) {
	k, ok := msg.(tea.KeyPressMsg)
	switch {
	case !ok:
	case key.Matches(k, c.keys.Up):
		c.cursor = max(c.cursor-1, 0)
	case key.Matches(k, c.keys.Down):
		c.cursor = min(c.cursor+1, len(c.items)-1)
	case key.Matches(k, c.keys.Choose):
		return false, c.choose(c.items[c.cursor])
	case key.Matches(k, c.keys.Close):
		return false, nil
	}
	return true, nil
}
