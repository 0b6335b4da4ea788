package ui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/internal/termsafe"
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
	sw := width(s)
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
	sw := width(s)
	if sw > w {
		return ansi.Truncate(s, w, "…")
	}
	return strings.Repeat(" ", w-sw) + s
}

// width is the cells s takes, as ansi.StringWidth counts them, styles
// (SGR sequences) and all. A frame is mostly printable ASCII, the dashboard's
// own marks (·, …, ≥, ─, ▁…█) and colour: each of those is one cell and its
// own grapheme, so a byte walk counts them and spares the grapheme walk of
// ansi.StringWidth, which was most of drawing a frame (issue 26). Anything
// else (another escape, a wide or combining character) is left to
// ansi.StringWidth.
func width(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f:
			n++
			i++
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			// CSI: parameter and intermediate bytes, then a final byte.
			j := i + 2
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x3f {
				j++
			}
			if j == len(s) || s[j] < 0x40 || s[j] > 0x7e {
				return ansi.StringWidth(s)
			}
			i = j + 1
		case c >= 0x80:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !narrow(r) {
				return ansi.StringWidth(s)
			}
			n++
			i += size
		default:
			return ansi.StringWidth(s)
		}
	}
	return n
}

// narrow reports whether r is one cell and a grapheme of its own beside
// any other such rune or ASCII: Latin-1's letters and signs, general
// punctuation (dashes, quotes, bullets, ellipsis), arrows, mathematical
// operators, box drawing and block elements. TestWidthMatchesAnsi checks
// every one against ansi.StringWidth.
func narrow(r rune) bool {
	switch {
	case r >= 0xa1 && r <= 0xff && r != 0xad: // not the soft hyphen
		return true
	case r >= 0x2010 && r <= 0x2027, r >= 0x2030 && r <= 0x205e: // general punctuation, no invisibles
		return true
	case r >= 0x2190 && r <= 0x21ff, r >= 0x2200 && r <= 0x22ff: // arrows, operators
		return true
	case r >= 0x2500 && r <= 0x259f: // box drawing, blocks
		return true
	}
	return false
}

// spaces is n blanks (none for n <= 0).
func spaces(n int) string { return strings.Repeat(" ", max(n, 0)) }

// fitLine truncates a styled line to w cells and pads it to exactly w.
func fitLine(s string, w int) string {
	sw := width(s)
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

// Sanitize makes text from elsewhere (the server, the simulator, an error)
// safe to draw in one line of the frame: control characters are dropped
// (C0, DEL and C1: an ESC would start one of the terminal's own escape
// sequences, a BEL ring it), and so are the bidirectional controls that
// reorder what follows them; runs of whitespace, newlines included, become
// one space, and leading and trailing whitespace goes. Every string that
// does not come from the dashboard itself passes through it before it is
// drawn.
func Sanitize(s string) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case termsafe.Control(r):
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// plain reports whether s is printable ASCII without a double space: most
// of what the dashboard draws, which sanitize returns as it is.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || (c == ' ' && i+1 < len(s) && s[i+1] == ' ') {
			return false
		}
	}
	return true
}

// rule draws a section title followed by a line to width w.
func rule(st *Styles, title string, extra string, w int) string {
	head := st.Section.Render(title)
	if extra != "" {
		head += " " + st.Dim.Render(extra)
	}
	hw := width(head)
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

// segment is one part of a line that may be dropped when the line is
// narrow: drop 0 is always kept; the highest drop goes first.
type segment struct {
	text string
	drop int
}

// fitSegments joins the segments with sep, leaving out the least needed
// ones until the line fits w cells: the highest drop first, and of equal
// drops the last first. Segments of the lowest drop are always kept: if
// they do not fit, the caller's line is cut.
func fitSegments(segs []segment, sep string, w int) string {
	keep := make([]bool, len(segs))
	order := make([]int, 0, len(segs)) // the order they are left out in
	least := math.MaxInt
	for i, s := range segs {
		if s.text != "" {
			keep[i] = true
			order = append(order, i)
			least = min(least, s.drop)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(segs[b].drop, segs[a].drop); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	})
	join := func() string {
		var b strings.Builder
		for i, s := range segs {
			if keep[i] {
				if b.Len() > 0 {
					b.WriteString(sep)
				}
				b.WriteString(s.text)
			}
		}
		return b.String()
	}
	for _, i := range order {
		if l := join(); width(l) <= w || segs[i].drop == least {
			return l
		}
		keep[i] = false
	}
	return join()
}

// wrap breaks s into lines of at most w cells between words (at spaces
// only: an application name, a key or a number is never broken at a hyphen
// or a dot); a word longer than a line is cut into pieces.
func wrap(s string, w int) []string {
	w = max(w, 1)
	var lines []string
	var cur strings.Builder
	curW := 0
	flush := func() {
		lines = append(lines, cur.String())
		cur.Reset()
		curW = 0
	}
	for _, word := range strings.Split(s, " ") {
		ww := width(word)
		if curW > 0 && curW+1+ww > w {
			flush()
		}
		for ww > w-curW && ww > w {
			if curW > 0 {
				flush()
			}
			lines = append(lines, ansi.Truncate(word, w, ""))
			word = ansi.TruncateLeft(word, w, "")
			ww = width(word)
		}
		if curW > 0 {
			cur.WriteByte(' ')
			curW++
		}
		cur.WriteString(word)
		curW += ww
	}
	if curW > 0 || len(lines) == 0 {
		flush()
	}
	return lines
}

// elide fits s into w cells, cutting it where it is like its peers (the
// other texts of its column) rather than where it differs: a name that
// shares a long prefix with another keeps the words that tell it apart
// whole, and its head where there is room: "public…row (0,5)",
// "p308…brain-1", "…brain-1". A name that shares nothing is cut at the
// end, as cell cuts it.
func elide(s string, w int, peers []string) string {
	if width(s) <= w {
		return s
	}
	d0 := 0 // where s starts to differ from the peer most like it
	for _, p := range peers {
		if p != s {
			d0 = max(d0, commonPrefix(s, p))
		}
	}
	room := w - 1 // beside the "…"
	if w <= 2 || d0 == 0 || width(s) != len(s) {
		return cell(s, w)
	}
	if len(s)-d0 > room {
		return "…" + cell(s[d0:], room)
	}
	// The distinguishing part from the start of its word, and of the word
	// before while it reads too short ("(0,5)" → "row (0,5)").
	const seps = " .:-_/"
	d := d0
	if i := strings.LastIndexAny(s[:d], seps); i >= 0 {
		d = i + 1
	}
	whole := true // the word before fitted, or there is none
	for len(s)-d < 6 && d > 1 {
		i := strings.LastIndexAny(s[:d-1], seps)
		if i < 0 {
			break
		}
		if len(s)-(i+1) > room {
			whole = false
			break
		}
		d = i + 1
	}
	if tail := len(s) - d; whole && tail <= room-3 {
		return s[:room-tail] + "…" + s[d:]
	}
	return "…" + strings.TrimLeft(s[len(s)-room:], seps)
}

// commonPrefix is the length in bytes of the prefix a and b share.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
