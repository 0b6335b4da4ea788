package ui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// filter selects lock rows. Its text is one of
//
//	ns:TEXT   the key's label contains TEXT ("ns:AGENT", "ns:AGENT 7")
//	app:TEXT  the application name contains TEXT
//	pid:N     the backend's pid is N
//	TEXT      any of the above (a number also matches the pid exactly)
//
// Matching ignores case.
type filter struct {
	raw   string
	field string // "ns", "app", "pid" or "" for any
	text  string // lower-cased
	pid   int64
	isPID bool
}

func parseFilter(s string) filter {
	s = strings.TrimSpace(s)
	f := filter{raw: s}
	if name, rest, ok := strings.Cut(s, ":"); ok {
		switch strings.ToLower(name) {
		case "ns", "key", "namespace":
			f.field = "ns"
			s = rest
		case "app", "application":
			f.field = "app"
			s = rest
		case "pid":
			f.field = "pid"
			s = rest
		}
	}
	f.text = strings.ToLower(strings.TrimSpace(s))
	if n, err := strconv.ParseInt(f.text, 10, 64); err == nil {
		f.pid, f.isPID = n, true
	}
	return f
}

func (f filter) empty() bool { return f.text == "" }

func (f filter) match(l *model.Lock) bool {
	switch f.field {
	case "ns":
		return containsFold(l.KeyLabel(), f.text)
	case "app":
		return containsFold(l.ApplicationName, f.text)
	case "pid":
		return f.isPID && int64(l.PID) == f.pid
	}
	return (f.isPID && int64(l.PID) == f.pid) ||
		containsFold(l.KeyLabel(), f.text) ||
		containsFold(l.ApplicationName, f.text) ||
		containsFold(l.Owner, f.text)
}

// containsFold reports whether s contains the lower-case sub, ignoring case.
func containsFold(s, sub string) bool {
	if len(sub) > len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 0x80 {
			return strings.Contains(strings.ToLower(s), sub)
		}
	}
	return strings.Contains(s, sub)
}

// filterInput is the one-line editor for the filter; the table follows
// it as it is typed.
type filterInput struct {
	st    *Styles
	input textinput.Model
	width int
}

func newFilterInput(st *Styles) filterInput {
	in := textinput.New()
	in.Prompt = "/ "
	in.Placeholder = "AGENT, app:NAME, pid:N, ns:NAME"
	in.CharLimit = 200
	// A steady cursor: blinking would redraw the screen twice a second.
	styles := in.Styles()
	styles.Cursor.Blink = false
	in.SetStyles(styles)
	return filterInput{st: st, input: in}
}

// SetSize sets the width of the line.
func (f *filterInput) SetSize(w int) {
	f.width = w
	f.input.SetWidth(max(w-lenHint-4, 10))
}

// Open focuses the editor on the current filter text.
func (f *filterInput) Open(current string) tea.Cmd {
	f.input.SetValue(current)
	f.input.CursorEnd()
	return f.input.Focus()
}

// Close ends editing.
func (f *filterInput) Close() { f.input.Blur() }

// Focused reports whether the filter is being edited.
func (f *filterInput) Focused() bool { return f.input.Focused() }

// Value is the text typed so far.
func (f *filterInput) Value() string { return f.input.Value() }

// Update passes a key to the editor.
func (f *filterInput) Update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	f.input, cmd = f.input.Update(msg)
	return cmd
}

const filterHint = "enter keep · esc clear"

var lenHint = len(filterHint)

// View renders the editor line.
func (f *filterInput) View() string {
	return fitLine(f.input.View()+"  "+f.st.Dim.Render(filterHint), f.width)
}
