package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// fmtDur renders a duration in at most six cells, precise where it matters:
// "230ms", "3.2s", "42s", "4m05s", "2h03m", "3d04h".
func fmtDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d == 0:
		return "0s"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, (d%time.Minute)/time.Second)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, (d%time.Hour)/time.Minute)
	}
	return fmt.Sprintf("%dd%02dh", d/(24*time.Hour), (d%(24*time.Hour))/time.Hour)
}

// fmtInterval renders a refresh interval: "250ms", "1s", "2.5s".
func fmtInterval(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

// fmtCount renders a counter with thousands separators: 12,345.
func fmtCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	if len(s) > 3 {
		var b strings.Builder
		pre := len(s) % 3
		if pre > 0 {
			b.WriteString(s[:pre])
		}
		for i := pre; i < len(s); i += 3 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(s[i : i+3])
		}
		s = b.String()
	}
	if neg {
		return "-" + s
	}
	return s
}

// fmtRate renders a per-second rate: "0", "4.2", "340".
func fmtRate(r float64) string {
	switch {
	case r <= 0:
		return "0"
	case r < 10:
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return fmtCount(int64(r + 0.5))
}

// cell fits plain text into exactly w cells: truncated with "…" or padded
// with spaces on the right.
func cell(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-sw)
}

// rcell is cell aligned right.
func rcell(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return strings.Repeat(" ", w-sw) + s
}

// fitLine truncates a styled line to w cells and pads it to exactly w.
func fitLine(s string, w int) string {
	sw := ansi.StringWidth(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return s + strings.Repeat(" ", w-sw)
}

// fitBlock makes lines exactly w cells wide and h lines tall: extra lines
// are cut, missing ones are blank.
func fitBlock(lines []string, w, h int) string {
	if h <= 0 || w <= 0 {
		return ""
	}
	var b strings.Builder
	for i := 0; i < h; i++ {
		if i > 0 {
			b.WriteByte('\n')
		}
		if i < len(lines) {
			b.WriteString(fitLine(lines[i], w))
		} else {
			b.WriteString(strings.Repeat(" ", w))
		}
	}
	return b.String()
}

// oneLine collapses whitespace, newlines included, so a value from the
// server (a query, an error) can never break the layout.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\r\t") && !strings.Contains(s, "  ") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// rule draws a section title followed by a line to width w.
func rule(st *Styles, title string, extra string, w int) string {
	head := st.Section.Render(title)
	if extra != "" {
		head += " " + st.Dim.Render(extra)
	}
	hw := ansi.StringWidth(head)
	if hw+2 > w {
		return fitLine(head, w)
	}
	return head + " " + st.Dim.Render(strings.Repeat("─", w-hw-1))
}

// sparkline draws values as block characters, scaled to the largest, the
// most recent on the right, in at most w cells.
func sparkline(values []float64, w int) string {
	const bars = "▁▂▃▄▅▆▇█"
	if w <= 0 {
		return ""
	}
	if len(values) > w {
		values = values[len(values)-w:]
	}
	peak := 0.0
	for _, v := range values {
		peak = max(peak, v)
	}
	runes := []rune(bars)
	var b strings.Builder
	for _, v := range values {
		i := 0
		if peak > 0 {
			i = int(v / peak * float64(len(runes)-1))
		}
		b.WriteRune(runes[min(max(i, 0), len(runes)-1)])
	}
	return b.String()
}

// plural renders "1 invariant" or "4 invariants".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// counted is plural with thousands separators: "1 key", "2,500 keys".
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmtCount(int64(n)) + " " + many
}
