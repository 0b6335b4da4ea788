package ui

import (
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// connState is the state of the connection to the server.
type connState int

const (
	connConnecting connState = iota // no poll has answered yet
	connOK
	connLost // the last poll failed; retrying with backoff
)

// header is the top line (server, refresh, live or paused, connection) and
// the banners under it: a lost connection and the role's privilege warning.
type header struct {
	st    *Styles
	width int

	info    model.ServerInfo
	mode    string
	conn    connState
	latency time.Duration
	taken   time.Time // the snapshot on screen

	lastErr string
	attempt int           // failed polls in a row
	retryIn time.Duration // until the next attempt
}

// SetSize sets the width.
func (h *header) SetSize(w int) { h.width = w }

// Height is 1 plus a line per banner.
func (h *header) Height() int {
	n := 1
	if h.conn == connLost {
		n++
	}
	if h.info.Warning != "" {
		n++
	}
	return n
}

// View renders the header and its banners, for the dashboard's refresh
// interval and whether it is paused.
func (h *header) View(paused bool, interval time.Duration) string {
	lines := []string{h.line(paused, interval)}
	if h.conn == connLost {
		// What to expect first, the cause after: a long cause is cut, not the rest.
		msg := "no connection · retry " + strconv.Itoa(h.attempt) + " in " + fmtInterval(h.retryIn)
		if !h.taken.IsZero() {
			msg += " · showing " + h.taken.Format("15:04:05")
		}
		msg += " · " + h.lastErr
		lines = append(lines, h.st.Banner.Render(cell(" ⚠ "+Sanitize(msg), h.width)))
	}
	if h.info.Warning != "" {
		lines = append(lines, h.st.Warning.Render(fitLine(" ⚠ "+Sanitize(h.info.Warning), h.width)))
	}
	return strings.Join(lines, "\n")
}

// line is the top line. Segments of least use are dropped first when it
// does not fit.
func (h *header) line(paused bool, interval time.Duration) string {
	st := h.st
	// server_version may carry the packager's suffix: "15.18 (Debian 15.18-0+deb12u1)".
	version, _, _ := strings.Cut(Sanitize(h.info.Version), " ")
	server := strings.TrimSpace("PostgreSQL " + version)
	who := Sanitize(h.info.User + "@" + h.info.Database)
	var live string
	if paused {
		live = st.Paused.Render(" PAUSED ")
	} else {
		live = st.Live.Render("● LIVE")
	}
	var conn string
	switch h.conn {
	case connConnecting:
		conn = st.Dim.Render("connecting…")
	case connOK:
		conn = st.Connected.Render("connected")
	case connLost:
		conn = st.Lost.Render("reconnecting")
	}
	type seg struct {
		text     string
		optional int // 0 always shown; higher is dropped first
	}
	segs := []seg{
		{st.App.Render("locktop"), 0},
		{server, 0},
		{who, 0},
		{st.Dim.Render(h.mode), 1},
		{"every " + fmtInterval(interval), 0},
		{live, 0},
		{conn, 0},
		{st.Dim.Render("poll " + fmtDur(h.latency)), 3},
		{st.Dim.Render("at " + h.taken.Format("15:04:05")), 2},
	}
	if h.mode == "" {
		segs[3].text = ""
	}
	if h.conn != connOK {
		segs[7].text = ""
	}
	if h.taken.IsZero() {
		segs[8].text = ""
	}
	sep := st.Dim.Render(" · ")
	join := func(drop int) string {
		var parts []string
		for _, s := range segs {
			if s.text != "" && (s.optional == 0 || s.optional < drop) {
				parts = append(parts, s.text)
			}
		}
		return strings.Join(parts, sep)
	}
	for drop := 4; drop > 0; drop-- {
		if l := join(drop); ansi.StringWidth(l) <= h.width {
			return fitLine(l, h.width)
		}
	}
	return fitLine(join(1), h.width)
}
