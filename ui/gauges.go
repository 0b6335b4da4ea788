package ui

import (
	"slices"
	"strconv"
	"strings"

	"github.com/locktop/locktop/model"
)

// gauges shows how full things are: the lock and work pools (in use of
// max, and acquirers waiting for a connection), the server's connections
// against max_connections, and lock waits per second.
type gauges struct {
	noKeys
	st    *Styles
	width int

	pools    []model.PoolStats
	conns    int
	maxConns int
	held     int
	waiting  int
	kinds    []model.KindCount // per kind, when the table holds more than advisory locks
	dbs      []dbCount         // per database of PostgreSQL locks
	servers  []serverConns     // per target, when there are several
	waitRate []float64         // waits/s per poll, the latest last
	polled   bool
	kindRow  bool // the row of counts per kind is shown (the layout holds it still)
	dbRow    bool // the row of counts per database is shown (likewise)
}

// dbCount is the holders and waiters of one database.
type dbCount struct {
	name          string
	held, waiting int
}

// countDatabases counts the PostgreSQL locks of each database, in order of
// first appearance (the table's order: by database).
func countDatabases(locks []model.Lock) []dbCount {
	var out []dbCount
	j := -1 // the last row's database's place: rows of one database follow each other
	for i := range locks {
		l := &locks[i]
		if !l.Kind.PG() || l.Database == "" {
			continue
		}
		if j < 0 || out[j].name != l.Database {
			j = slices.IndexFunc(out, func(c dbCount) bool { return c.name == l.Database })
			if j < 0 {
				j = len(out)
				out = append(out, dbCount{name: l.Database})
			}
		}
		if l.Granted {
			out[j].held++
		} else {
			out[j].waiting++
		}
	}
	return out
}

// serverConns is one target's server: its client backends, or down.
type serverConns struct {
	name  string
	conns int
	up    bool
}

// countServers reads each target's client backends from its PostgreSQL
// source ("NAME/postgres") of the merged snapshot, down when its feed lost
// its connection (its last snapshot is still shown); none of one unnamed
// target.
func countServers(s *model.Snapshot, h *header) []serverConns {
	var out []serverConns
	for _, st := range s.Sources {
		if sv, src := model.SplitSource(st.Name); sv != "" && src == "postgres" {
			out = append(out, serverConns{name: sv, conns: st.Connections, up: st.Err == "" && h.serverState(sv) != connLost})
		}
	}
	return out
}

// serverCounts renders each target's client backends: "a 57  b 12  c
// down"; the gauge above is the first target's, against its
// max_connections.
func (g *gauges) serverCounts(w int) string {
	s := cell("server conns", gaugeLabelW)
	for i, c := range g.servers {
		if i > 0 {
			s += "  "
		}
		if c.up {
			s += Sanitize(c.name) + " " + fmtCount(int64(c.conns))
		} else {
			s += Sanitize(c.name) + g.st.GaugeWarn.Render(" down")
		}
	}
	return fitLine(s, w)
}

// byDatabase reports whether the gauges count locks per database: when
// locks are in more than one.
func (g *gauges) byDatabase() bool { return len(g.dbs) > 1 }

// dbCounts renders the holders and waiters of each database: "app 12·3w
// db2 3·2w".
func (g *gauges) dbCounts(w int) string {
	s := cell("by database", gaugeLabelW)
	for i, d := range g.dbs {
		if i > 0 {
			s += "  "
		}
		s += Sanitize(d.name) + " " + fmtCount(int64(d.held))
		if d.waiting > 0 {
			s += g.st.Waits.Render("·" + fmtCount(int64(d.waiting)) + "w")
		}
	}
	return fitLine(s, w)
}

// rateHistory is how many polls of waits/s the sparkline keeps.
const rateHistory = 60

// SetSize sets the width.
func (g *gauges) SetSize(w, _ int) { g.width = w }

// SetSnapshot takes the server's connection count and the waits that
// began since its last poll. (The lock counts, of every source, are set by
// the model.)
func (g *gauges) SetSnapshot(s *model.Snapshot) {
	g.conns, g.polled = s.Connections, true
	if s.Interval > 0 {
		g.waitRate = append(g.waitRate, float64(s.NewWaits)/s.Interval.Seconds())
		if len(g.waitRate) > rateHistory {
			g.waitRate = g.waitRate[len(g.waitRate)-rateHistory:]
		}
	}
}

// perLine is how many gauges share a line.
func (g *gauges) perLine() int { return max(g.width/40, 1) }

func (g *gauges) count() int {
	n := 2 // server connections, lock waits/s
	pools := 0
	for _, p := range g.pools {
		if p.MaxConns > 0 {
			pools++
		}
	}
	if pools == 0 {
		return n + 1 // the lock counts stand in for the pools
	}
	return n + pools
}

// byKind reports whether the gauges count locks per kind: when any kind
// but advisory is in the table.
func (g *gauges) byKind() bool {
	return len(g.kinds) > 1 || (len(g.kinds) == 1 && g.kinds[0].Kind != model.KindAdvisory)
}

// kindCounts renders the holders and waiters of each kind: "advisory
// 12·3w  row 1·2w  redis 4  lease 2·1w".
func (g *gauges) kindCounts(w int) string {
	s := cell("by kind", gaugeLabelW)
	for i, k := range g.kinds {
		if i > 0 {
			s += "  "
		}
		s += kindName(k.Kind) + " " + fmtCount(int64(k.Held))
		if k.Waiting > 0 {
			s += g.st.Waits.Render("·" + fmtCount(int64(k.Waiting)) + "w")
		}
	}
	return fitLine(s, w)
}

// Height is the lines the gauges take: the counts per kind take a line
// of their own.
func (g *gauges) Height() int {
	per := g.perLine()
	h := (g.count() + per - 1) / per
	if g.kindRow {
		h++
	}
	if g.dbRow {
		h++
	}
	if len(g.servers) > 1 {
		h++
	}
	return h
}

// View renders the gauges, flowed into lines.
func (g *gauges) View() string {
	per := g.perLine()
	cw := g.width / per
	var cells []string
	for _, p := range g.pools {
		if p.MaxConns <= 0 {
			continue
		}
		extra := ""
		if p.Waiting > 0 {
			extra = g.st.GaugeWarn.Render(" · " + fmtCount(p.Waiting) + " waiting")
		} else {
			extra = g.st.Dim.Render(" · 0 waiting")
		}
		cells = append(cells, g.gauge(poolLabel(p.Name), int(p.InUse), int(p.MaxConns), extra, cw))
	}
	if len(cells) == 0 {
		cells = append(cells, g.locks(cw))
	}
	if g.polled {
		label := "server conns"
		if len(g.servers) > 1 {
			label = Sanitize(g.servers[0].name) + " conns" // the first target's: each one's is below
		}
		cells = append(cells, g.gauge(label, g.conns, g.maxConns, "", cw))
	} else {
		cells = append(cells, cell("server conns  –", cw))
	}
	cells = append(cells, g.rate(cw))

	var lines []string
	for i := 0; i < len(cells); i += per {
		lines = append(lines, strings.Join(cells[i:min(i+per, len(cells))], ""))
	}
	if g.kindRow {
		lines = append(lines, g.kindCounts(g.width))
	}
	if g.dbRow {
		lines = append(lines, g.dbCounts(g.width))
	}
	if len(g.servers) > 1 {
		lines = append(lines, g.serverCounts(g.width))
	}
	return fitBlock(lines, g.width, len(lines))
}

func poolLabel(name string) string {
	switch name {
	case "lock", "work":
		return name + " pool"
	case "shared":
		return "shared pool"
	}
	return name
}

const gaugeLabelW = 13

// gauge renders "label  ██████░░░░ 6/10 extra" in exactly w cells.
func (g *gauges) gauge(label string, used, limit int, extra string, w int) string {
	nums := strconv.Itoa(used) + "/" + strconv.Itoa(limit)
	extraW := width(extra)
	barW := min(max(w-gaugeLabelW-len(nums)-extraW-3, 4), 20)
	frac := 0.0
	if limit > 0 {
		frac = min(float64(used)/float64(limit), 1)
	}
	full := int(frac*float64(barW) + 0.5)
	style := g.st.GaugeOK
	switch {
	case frac >= 0.9:
		style = g.st.GaugeCrit
	case frac >= 0.7:
		style = g.st.GaugeWarn
	}
	bar := style.Render(strings.Repeat("█", full)) + g.st.GaugeEmpty.Render(strings.Repeat("░", barW-full))
	return fitLine(cell(label, gaugeLabelW)+bar+" "+nums+extra, w-1) + " "
}

// locks stands in for the pools when there are none (monitor only).
func (g *gauges) locks(w int) string {
	s := cell("locks", gaugeLabelW) + fmtCount(int64(g.held)) + " held · "
	if g.waiting > 0 {
		s += g.st.Waits.Render(fmtCount(int64(g.waiting)) + " waiting")
	} else {
		s += "0 waiting"
	}
	return fitLine(s, w)
}

// rate renders the waits that began per second (new waits between two
// polls, not how many wait), with its recent history, and how many wait
// now: a queue that does not move begins no new waits.
func (g *gauges) rate(w int) string {
	label := cell("lock waits/s", gaugeLabelW)
	waiting := " · " + fmtCount(int64(g.waiting)) + " waiting now"
	if len(g.waitRate) == 0 {
		return fitLine(label+"–"+waiting, w)
	}
	now := fmtRate(g.waitRate[len(g.waitRate)-1]) + " new"
	spark := sparkline(g.waitRate, max(min(w-gaugeLabelW-len(now)-len(waiting)-2, 30), 0))
	return fitLine(label+g.st.Note.Render(spark)+" "+now+waiting, w)
}
