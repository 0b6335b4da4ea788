package ui

import (
	"strings"

	tea "charm.land/bubbletea/v2"
)

// screen is the Model as Run hands it to Bubble Tea: its frames without
// the blanks that pad each line to the width. Bubble Tea's renderer clears
// its buffer before drawing each frame and then parses every cell of it,
// so a blank it is given costs as much as a letter and draws nothing the
// cleared buffer does not show; at rest, most of a 160×50 frame is padding
// (issue 26). The Model's own View keeps the padding: its golden files and
// overlays are laid out on whole lines.
type screen struct {
	m          *Model
	last, trim string // the Model's last frame and it trimmed
}

func (s *screen) Init() tea.Cmd { return s.m.Init() }

func (s *screen) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := s.m.Update(msg)
	return s, cmd
}

func (s *screen) View() tea.View {
	v := s.m.View()
	if v.Content != s.last { // the same frame (a tick) is trimmed once
		s.last, s.trim = v.Content, trimLines(v.Content)
	}
	v.Content = s.trim
	return v
}

// trimLines drops the spaces that end each line of frame: the blanks after
// the last escape sequence of a line, which are unstyled (those inside a
// style, a reversed selection, end before its reset and are kept).
func trimLines(frame string) string {
	var b strings.Builder
	b.Grow(len(frame))
	for i := 0; ; i++ {
		line, rest, more := strings.Cut(frame, "\n")
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight(line, " "))
		if !more {
			return b.String()
		}
		frame = rest
	}
}
