package ui

import (
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
)

// footer is the last line: the keys of whatever has them now (the main
// screen's, or the open overlay's), rendered from their bindings, and a
// status message on the right for a few seconds.
type footer struct {
	noKeys
	st    *Styles
	width int
	keys  []key.Binding // the keys of what has them now

	status string
	isErr  bool
	until  time.Time
}

// statusFor is how long a status message stays in the footer.
const statusFor = 5 * time.Second

// SetSize sets the width.
func (f *footer) SetSize(w, _ int) { f.width = w }

// say shows a status message until statusFor after now.
func (f *footer) say(s string, isErr bool, now time.Time) {
	f.status, f.isErr, f.until = s, isErr, now.Add(statusFor)
}

// expire drops the status message once its time is up, and reports
// whether it did.
func (f *footer) expire(now time.Time) bool {
	if !f.until.IsZero() && now.After(f.until) {
		f.status, f.until = "", time.Time{}
		return true
	}
	return false
}

// View renders the keys and the status.
func (f *footer) View() string {
	status := ""
	if f.status != "" {
		st := f.st.Status
		if f.isErr {
			st = f.st.ErrorMsg
		}
		status = st.Render(f.status)
	}
	sw := width(status)
	hints := shortHelp(f.st, f.keys, f.width-sw-2)
	gap := max(f.width-width(hints)-sw, 1)
	return fitLine(hints+spaces(gap)+status, f.width)
}

// shortHelp renders the enabled bindings as "key desc • key desc …" in at
// most w cells, whole items only. (bubbles/help's short view lets the last
// items run past its width when the ellipsis does not fit.)
func shortHelp(st *Styles, bindings []key.Binding, w int) string {
	sep := st.Help.ShortSeparator.Render(" • ")
	var b strings.Builder
	used := 0
	for i, kb := range bindings {
		if !kb.Enabled() {
			continue
		}
		h := kb.Help()
		item := st.Help.ShortKey.Render(h.Key) + " " + st.Help.ShortDesc.Render(h.Desc)
		iw := width(h.Key) + 1 + width(h.Desc)
		if used > 0 {
			iw += 3
			item = sep + item
		}
		room := w
		if i < len(bindings)-1 {
			room -= 2 // for " …"
		}
		if used+iw > room {
			if used > 0 {
				b.WriteString(st.Help.Ellipsis.Render(" …"))
			}
			break
		}
		b.WriteString(item)
		used += iw
	}
	return b.String()
}

// shortHelpWidth is the cells shortHelp takes for every enabled binding.
func shortHelpWidth(bindings []key.Binding) int {
	n := 0
	for _, kb := range bindings {
		if !kb.Enabled() {
			continue
		}
		if n > 0 {
			n += 3
		}
		h := kb.Help()
		n += width(h.Key) + 1 + width(h.Desc)
	}
	return n
}
