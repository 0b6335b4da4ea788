package ui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// header is the top line — locktop, the server it watches, how it runs,
// the refresh loop's state — and the banners under it: a source that does
// not answer (one banner per source, the others live), a part of a source
// that does not answer (a Redis Cluster's node, one banner each) or a
// listing cut short, the role's privilege warning and the operator's
// warnings. It renders the poller; it keeps no state of the loop itself.
type header struct {
	st    *Styles
	keys  *KeyMap
	poll  *poller
	width int

	info     model.ServerInfo
	server   string // user@host:port/database, never a password
	mode     string
	warnings []string
	rewound  bool      // the replay is the live dashboard's own history
	replay   *timeline // not nil in a replay: the line says so, and when
	// recorded, when not nil, are the sources' states as the rewound
	// history recorded them: the banners show them instead of the live
	// loop's, which goes on underneath.
	recorded []*feed
	// locksOff: the simulator runs without its locks (the races allowed),
	// said on the top line until they are back on.
	locksOff bool
	// targets are the servers watched, when several (fleet.go), and waits
	// each one's waiters.
	targets []string
	waits   map[string]int
	// deadlocks are the deadlocks now: a banner each.
	deadlocks []waitfor.Cycle
}

// maxWarningLines is how many lines one warning may wrap onto.
const maxWarningLines = 2

// SetSize sets the width; the height follows the banners (Height).
func (h *header) SetSize(w, _ int) { h.width = w }

// ShortHelp is the refresh loop's keys, which the header shows the state
// of.
func (h *header) ShortHelp() []key.Binding {
	return []key.Binding{h.keys.Pause, h.keys.Faster, h.keys.Slower}
}

// FullHelp is the loop's keys in one column.
func (h *header) FullHelp() [][]key.Binding {
	k := h.keys
	return [][]key.Binding{{k.Pause, k.Refresh, k.Faster, k.Slower}}
}

// Height is the top line plus a line per banner.
func (h *header) Height() int { return len(h.lines()) }

// View renders the header and its banners.
func (h *header) View() string { return strings.Join(h.lines(), "\n") }

func (h *header) lines() []string {
	lines := []string{h.line()}
	if len(h.targets) > 0 {
		lines = append(lines, fitLine(h.st.Dim.Render(cell(Sanitize(h.fleetLine()), h.width)), h.width))
	}
	feeds := h.poll.feeds
	if h.recorded != nil {
		feeds = h.recorded
	}
	for _, f := range feeds {
		if f.conn != connLost {
			continue
		}
		// What to expect first, the cause after: a long cause is cut, not the rest.
		msg := f.name + ": no connection · retry " + strconv.Itoa(f.failures) + " in " + fmtInterval(f.retryIn)
		if h.replay != nil {
			msg = f.name + ": no connection (recorded: " + strconv.Itoa(f.failures) + " failed polls)"
		}
		if !f.taken.IsZero() {
			msg += " · showing " + f.taken.Format("15:04:05")
		}
		msg += " · " + f.lastErr
		lines = append(lines, h.st.Banner.Render(cell(" ⚠ "+Sanitize(msg), h.width)))
	}
	for _, f := range feeds {
		if f.conn != connOK {
			continue
		}
		// A part of the source (a Cluster's node) that did not answer: the
		// other parts' locks are on screen.
		for _, p := range f.partial {
			lines = append(lines, h.st.Banner.Render(cell(" ⚠ "+Sanitize(f.name+": part missing · "+p), h.width)))
		}
		if f.truncated {
			lines = append(lines, h.st.Warning.Render(cell(" ⚠ "+Sanitize(f.name+": more locks than listed (a bound cut the listing)"), h.width)))
		}
	}
	for i := range h.deadlocks {
		lines = append(lines, h.st.Banner.Render(cell(" ⚠ "+Sanitize(deadlockBanner(&h.deadlocks[i], h.keys)), h.width)))
	}
	warnings := h.warnings
	if h.info.Warning != "" {
		warnings = append([]string{h.info.Warning}, warnings...)
	}
	for _, w := range warnings {
		wrapped := wrap(Sanitize(w), max(h.width-3, 10))
		if len(wrapped) > maxWarningLines {
			wrapped = wrapped[:maxWarningLines]
			wrapped[maxWarningLines-1] += " …"
		}
		for i, l := range wrapped {
			lead := "   "
			if i == 0 {
				lead = " ⚠ "
			}
			lines = append(lines, h.st.Warning.Render(fitLine(lead+l, h.width)))
		}
	}
	return lines
}

// serverLabel is who and where: the server option, else user@database.
func (h *header) serverLabel() string {
	if h.server != "" {
		return Sanitize(h.server)
	}
	return Sanitize(h.info.User + "@" + h.info.Database)
}

// line is the top line. It always names the server, cut in its middle
// when even that does not fit; segments of least use go first.
func (h *header) line() string {
	st, p := h.st, h.poll
	f := &feed{} // no server: connecting, for ever
	if len(p.feeds) > 0 {
		f = p.feeds[0]
	}
	// server_version may carry the packager's suffix: "15.18 (Debian 15.18-0+deb12u1)".
	version, _, _ := strings.Cut(Sanitize(h.info.Version), " ")
	if h.replay != nil {
		return h.replayLine(version)
	}
	live := st.Live.Render("● LIVE")
	if p.paused {
		live = st.Paused.Render(" PAUSED ")
	}
	var conn string
	switch f.conn {
	case connConnecting:
		conn = st.Dim.Render("connecting…")
	case connOK:
		conn = st.Connected.Render("connected")
	case connLost:
		conn = st.Lost.Render("reconnecting")
	}
	segs := []segment{
		{st.App.Render("locktop"), 0},
		{"", 0}, // the server, below
		{strings.TrimSpace("PostgreSQL " + version), 2},
		{st.Dim.Render(h.mode), 3},
		{every(p), 1},
		{live, 0},
		{conn, 0},
	}
	if h.locksOff {
		segs = append(segs[:6], append([]segment{{st.Banner.Render(" LOCKS OFF "), 0}}, segs[6:]...)...)
	}
	if f.conn == connOK {
		segs = append(segs, segment{st.Dim.Render("poll " + fmtDur(f.latency)), 5})
	}
	if !f.taken.IsZero() {
		segs = append(segs, segment{st.Dim.Render("at " + f.taken.Format("15:04:05")), 4})
	}
	if h.mode == "" {
		segs[3].text = ""
	}
	// The server gets what the kept segments leave, and at least its own
	// width when that fits.
	server := h.serverLabel()
	segs[1].text = server
	l := fitSegments(segs, st.Dim.Render(" · "), h.width)
	if over := width(l) - h.width; over > 0 {
		segs[1].text = middle(server, width(server)-over)
		l = fitSegments(segs, st.Dim.Render(" · "), h.width)
	}
	return fitLine(l, h.width)
}

// middle cuts s to w cells by taking out its middle: a socket directory's
// start and a database's name both stay.
func middle(s string, w int) string {
	sw := width(s)
	if sw <= w {
		return s
	}
	if w < 3 {
		return ansi.Truncate(s, max(w, 0), "")
	}
	head := (w - 1) / 2
	tail := w - 1 - head
	return ansi.Truncate(s, head, "") + "…" + ansi.TruncateLeft(s, sw-tail, "")
}

// replayLine is the top line of a replay: the recorded server, that this
// is a replay, and of when; the timeline under the table says where.
func (h *header) replayLine(version string) string {
	st, r := h.st, h.replay
	label := " REPLAY "
	if h.rewound {
		// Plainly not the present: the live view is a key away.
		label = " REWOUND · NOT LIVE "
	}
	when := ""
	if n := r.rep.Len(); n > 0 {
		first, last := r.rep.Time(0), r.rep.Time(n-1)
		when = "recorded " + first.Format("2006-01-02 15:04:05") + " – "
		if h.rewound {
			when = "history " + first.Format("15:04:05") + " – "
		}
		if first.YearDay() == last.YearDay() && first.Year() == last.Year() {
			when += last.Format("15:04:05")
		} else {
			when += last.Format("2006-01-02 15:04:05")
		}
	}
	segs := []segment{
		{st.App.Render("locktop"), 0},
		{"", 0}, // the server, below
		{strings.TrimSpace("PostgreSQL " + version), 2},
		{st.Paused.Render(label), 0},
		{st.Dim.Render(when), 0},
	}
	if n := r.rep.Len(); n > 0 {
		segs = append(segs, segment{"at " + r.rep.Time(r.pos).Format("15:04:05"), 0})
	}
	server := h.serverLabel()
	segs[1].text = server
	l := fitSegments(segs, st.Dim.Render(" · "), h.width)
	if over := width(l) - h.width; over > 0 {
		segs[1].text = middle(server, width(server)-over)
		l = fitSegments(segs, st.Dim.Render(" · "), h.width)
	}
	return fitLine(l, h.width)
}

// every is the header's refresh interval: the fast one while locks are
// waited for, said so.
func every(p *poller) string {
	if d := p.due(); d != p.interval {
		return "every " + fmtInterval(d) + " (waits)"
	}
	return "every " + fmtInterval(p.interval)
}
