package ui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
)

// timeline is the replay's line above the footer: where in the recording
// the screen is, playing or paused, at what speed. It renders the replay's
// state; Model's replay methods change it.
type timeline struct {
	st    *Styles
	keys  *KeyMap
	rep   Replay
	width int

	pos     int
	playing bool
	speed   float64
	seq     int // the armed tick's
}

// SetSize sets the width; the height is one line.
func (t *timeline) SetSize(w, _ int) { t.width = w }

// ShortHelp is the replay's keys.
func (t *timeline) ShortHelp() []key.Binding {
	k := t.keys
	return []key.Binding{k.Pause, k.StepBack, k.StepForward, k.Seek, k.Faster, k.Slower}
}

// FullHelp is the replay's keys in one column.
func (t *timeline) FullHelp() [][]key.Binding { return [][]key.Binding{t.ShortHelp()} }

// View renders the line: state and speed, the time on screen, a bar from
// the first snapshot's time to the last's with the position marked, and
// the step.
func (t *timeline) View() string {
	st, n := t.st, t.rep.Len()
	if n == 0 {
		return fitLine(st.Dim.Render(" empty recording"), t.width)
	}
	state := st.Paused.Render(" ❚❚ PAUSED ")
	if t.playing {
		state = st.Live.Render(" ▶ PLAYING ")
	}
	first, last, cur := t.rep.Time(0), t.rep.Time(n-1), t.rep.Time(t.pos)
	left := state + " ×" + fmtSpeed(t.speed) + "  " + st.App.Render(cur.Format("15:04:05")) + "  " + st.Dim.Render(first.Format("15:04:05")) + " "
	right := " " + st.Dim.Render(last.Format("15:04:05")) + "  " + strconv.Itoa(t.pos+1) + "/" + strconv.Itoa(n)
	bar := t.width - width(left) - width(right)
	if bar < 10 {
		return fitLine(left+right, t.width)
	}
	at := 0
	if span := last.Sub(first); span > 0 {
		at = int(int64(cur.Sub(first)) * int64(bar-1) / int64(span))
	}
	at = min(max(at, 0), bar-1)
	line := st.Dim.Render(strings.Repeat("─", at)) + "●" + st.Dim.Render(strings.Repeat("─", bar-1-at))
	return fitLine(left+line+right, t.width)
}
