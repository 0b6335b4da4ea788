package ui

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// simPanel shows the simulator: scenario, rates, locks on or off, the
// counters of each worker kind, a throughput sparkline and the invariants.
type simPanel struct {
	st     *Styles
	width  int
	height int

	status     model.SimStatus
	has        bool
	now        time.Time // for the simulator's uptime
	throughput []float64
}

// throughputHistory is how many status reads the sparkline keeps.
const throughputHistory = 120

// SetSize sets the cells the panel may use.
func (p *simPanel) SetSize(w, h int) { p.width, p.height = w, h }

// SetStatus takes a new status.
func (p *simPanel) SetStatus(s model.SimStatus, now time.Time) {
	p.status, p.has, p.now = s, true, now
	p.throughput = append(p.throughput, s.Throughput)
	if len(p.throughput) > throughputHistory {
		p.throughput = p.throughput[len(p.throughput)-throughputHistory:]
	}
}

// combined reports whether throughput and invariants share a line: wide
// enough, they do; narrow, the sparkline gets a line of its own.
func (p *simPanel) combined() bool { return p.width >= 72 }

// Height is the lines the panel would like: everything shown.
func (p *simPanel) Height() int {
	n := 3 + 1 + len(p.status.Workers) + 1 // title, rates, throughput; column titles, kinds, total
	if !p.combined() {
		n++ // the invariants on a line of their own
	}
	if !p.status.OK() {
		n++
	}
	return n
}

// View renders the panel in its cells; worker kinds that do not fit are
// summed into the total only.
func (p *simPanel) View() string {
	if p.width <= 0 || p.height <= 0 {
		return ""
	}
	st, s := p.st, &p.status
	var lines []string
	if !p.has {
		lines = append(lines, rule(st, "Simulator", "starting…", p.width))
		return fitBlock(lines, p.width, p.height)
	}
	locks := st.Good.Render("locks ON")
	if !s.LocksEnabled {
		locks = st.Bad.Render("locks OFF (races allowed)")
	}
	run := ""
	if !s.Running {
		run = " · stopped"
	} else if !s.Started.IsZero() && !p.now.IsZero() {
		run = " · up " + fmtDur(p.now.Sub(s.Started))
	}
	pool := ""
	if s.SharedPool {
		pool = " · one shared pool"
	}
	lines = append(lines, rule(st, "Simulator", Sanitize(s.Scenario)+" · "+fmtCount(int64(s.Agents))+" agents"+run+pool, p.width))

	rates := make([]string, 0, len(s.Rates))
	for _, r := range s.Rates {
		rates = append(rates, Sanitize(r.Name)+" "+simRate(r.Value))
	}
	lines = append(lines, locks+st.Dim.Render(" · rates: ")+strings.Join(rates, st.Dim.Render(" · ")))

	broken := 0
	var worst model.Invariant
	for _, inv := range s.Invariants {
		if inv.Violations > 0 {
			broken++
			if worst.Violations == 0 {
				worst = inv
			}
		}
	}
	var inv string
	switch total := len(s.Invariants); {
	case total == 0:
		inv = st.Dim.Render("no invariants checked")
	case broken == 0:
		inv = st.Good.Render("✓ " + plural(total, "invariant holds", "invariants hold"))
	default:
		inv = st.Bad.Render("✗ " + strconv.Itoa(broken) + " of " + plural(total, "invariant", "invariants") + " broken")
	}
	now := fmtRate(s.Throughput) + "/s"
	if p.combined() {
		// One line: the sparkline takes what the invariants leave.
		room := p.width - len("throughput ") - len(now) - 4 - ansi.StringWidth(inv)
		spark := sparkline(p.throughput, min(max(room, 4), 60))
		lines = append(lines, "throughput "+st.Note.Render(spark)+" "+now+st.Dim.Render(" · ")+inv)
	} else {
		spark := sparkline(p.throughput, min(max(p.width-len("throughput ")-len(now)-1, 4), 60))
		lines = append(lines, "throughput "+st.Note.Render(spark)+" "+now, inv)
	}
	if broken > 0 {
		detail := "  ✗ " + Sanitize(worst.Name) + " ×" + fmtCount(worst.Violations)
		if worst.Last != "" {
			detail += ": " + Sanitize(worst.Last)
		}
		lines = append(lines, st.Bad.Render(fitLine(detail, p.width)))
	}

	// Worker counters: as many kinds as fit, then the total of all.
	room := p.height - len(lines) - 2
	if room < 0 {
		return fitBlock(lines, p.width, p.height)
	}
	kw := 13
	nw := max((p.width-kw)/5, 5)
	heads := []string{"ACQUIRED", "SKIPPED", "TIMEOUTS", "REENTRANT", "ERRORS"}
	if nw < 10 {
		heads = []string{"acq", "skip", "tmout", "reent", "err"}
	}
	head := cell("WORKER", kw)
	for _, h := range heads {
		head += rcell(h, nw)
	}
	lines = append(lines, st.ColHead.Render(fitLine(head, p.width)))
	kinds := slices.Sorted(maps.Keys(s.Workers))
	var sum model.Counters
	for _, k := range kinds {
		sum = sum.Add(s.Workers[k])
	}
	shown := min(len(kinds), room)
	for _, k := range kinds[:shown] {
		lines = append(lines, counterRow(st, k, s.Workers[k], kw, nw))
	}
	label := "total"
	if shown < len(kinds) {
		label = "total (" + strconv.Itoa(len(kinds)) + ")"
	}
	lines = append(lines, st.Bold.Render(counterRow(st, label, sum, kw, nw)))
	return fitBlock(lines, p.width, p.height)
}

// simRate renders a simulator's rate; 0 is a rate without a limit (the
// simulator's drivers then run back to back).
func simRate(r float64) string {
	if r == 0 {
		return "max"
	}
	return fmtRate(r)
}

func counterRow(st *Styles, name string, c model.Counters, kw, nw int) string {
	var b strings.Builder
	b.WriteString(cell(Sanitize(name), kw))
	b.WriteString(rcell(fmtCount(c.Acquired), nw))
	b.WriteString(rcell(fmtCount(c.Skipped), nw))
	num := func(n int64, bad bool) {
		if n > 0 && bad {
			b.WriteString(st.TimeWarn.Render(rcell(fmtCount(n), nw)))
			return
		}
		b.WriteString(rcell(fmtCount(n), nw))
	}
	num(c.Timeouts, true)
	num(c.Reentrant, true)
	if c.Errors > 0 {
		b.WriteString(st.Bad.Render(rcell(fmtCount(c.Errors), nw)))
	} else {
		b.WriteString(rcell("0", nw))
	}
	return b.String()
}
