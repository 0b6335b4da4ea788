package ui

import (
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// filterInput is the one-line editor of the filter, in the footer; the
// table follows it as it is typed. It takes every key as text, q included.
type filterInput struct {
	st     *Styles
	keys   *KeyMap
	input  textinput.Model
	change func(text string) // the table's filter follows the text
	width  int
}

func newFilterInput(st *Styles, k *KeyMap, current string, change func(string)) (*filterInput, tea.Cmd) {
	in := textinput.New()
	in.Prompt = hint(k.Filter) + " "
	in.Placeholder = "AGENT 7, ns:AGENT =7, app:NAME, pid:N, kind:KIND, database:NAME, tenant-a:2025-01-15"
	in.CharLimit = 200
	// A steady cursor: blinking would redraw the screen twice a second.
	styles := in.Styles()
	styles.Cursor.Blink = false
	in.SetStyles(styles)
	in.SetValue(current)
	in.CursorEnd()
	f := &filterInput{st: st, keys: k, input: in, change: change}
	return f, f.input.Focus()
}

// SetSize sets the width of the line.
func (f *filterInput) SetSize(w, _ int) {
	f.width = w
	// The prompt, the cursor and two blanks beside the keys.
	f.input.SetWidth(max(w-shortHelpWidth(f.ShortHelp())-width(f.input.Prompt)-3, 10))
}

// Typing is always true: the editor takes text.
func (f *filterInput) Typing() bool { return true }

// Place is the footer line.
func (f *filterInput) Place() placement { return placeFooter }

// ShortHelp is the editor's keys.
func (f *filterInput) ShortHelp() []key.Binding { return []key.Binding{f.keys.Keep, f.keys.Clear} }

// FullHelp is ShortHelp in one column.
func (f *filterInput) FullHelp() [][]key.Binding { return [][]key.Binding{f.ShortHelp()} }

// Update keeps the filter on enter, drops it on esc, and otherwise edits
// it, the table following.
func (f *filterInput) Update(msg tea.Msg) (bool, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case key.Matches(k, f.keys.Keep):
			return false, nil
		case key.Matches(k, f.keys.Clear):
			f.change("")
			return false, nil
		}
	}
	before := f.input.Value()
	var cmd tea.Cmd
	f.input, cmd = f.input.Update(msg)
	if v := f.input.Value(); v != before {
		f.change(v)
	}
	return true, cmd
}

// View renders the editor line and its keys.
func (f *filterInput) View() string {
	return fitLine(f.input.View()+"  "+shortHelp(f.st, f.ShortHelp(), f.width), f.width)
}
