package ui

import (
	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// seekInput is the one-line editor of a replay's seek, in the footer: a
// time of day, a date and time, an offset, start or end. enter seeks, esc
// gives up.
type seekInput struct {
	st    *Styles
	keys  *KeyMap
	input textinput.Model
	seek  func(text string)
	width int
}

func newSeekInput(st *Styles, k *KeyMap, seek func(string)) (*seekInput, tea.Cmd) {
	in := textinput.New()
	in.Prompt = "seek to "
	in.Placeholder = "03:12:05, +30s, -1m, 90s (after the start), start, end"
	in.CharLimit = 64
	styles := in.Styles()
	styles.Cursor.Blink = false
	in.SetStyles(styles)
	s := &seekInput{st: st, keys: k, input: in, seek: seek}
	return s, s.input.Focus()
}

// SetSize sets the width of the line.
func (s *seekInput) SetSize(w, _ int) {
	s.width = w
	s.input.SetWidth(max(w-shortHelpWidth(s.ShortHelp())-width(s.input.Prompt)-3, 10))
}

// Typing is always true: the editor takes text.
func (s *seekInput) Typing() bool { return true }

// Place is the footer line.
func (s *seekInput) Place() placement { return placeFooter }

// ShortHelp is the editor's keys.
func (s *seekInput) ShortHelp() []key.Binding {
	return []key.Binding{with(s.keys.Keep, "seek"), with(s.keys.Clear, "cancel")}
}

// FullHelp is ShortHelp in one column.
func (s *seekInput) FullHelp() [][]key.Binding { return [][]key.Binding{s.ShortHelp()} }

// Update seeks on enter, gives up on esc, and otherwise edits.
func (s *seekInput) Update(msg tea.Msg) (bool, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok {
		switch {
		case key.Matches(k, s.keys.Keep):
			if v := s.input.Value(); v != "" {
				s.seek(v)
			}
			return false, nil
		case key.Matches(k, s.keys.Clear):
			return false, nil
		}
	}
	var cmd tea.Cmd
	s.input, cmd = s.input.Update(msg)
	return true, cmd
}

// View renders the editor line and its keys.
func (s *seekInput) View() string {
	return fitLine(s.input.View()+"  "+shortHelp(s.st, s.ShortHelp(), s.width), s.width)
}
