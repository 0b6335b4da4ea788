package ui

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"

	"github.com/locktop/locktop/model"
)

// simPanel shows the simulator: scenario, rates, locks on or off, the
// counters of each worker kind, a throughput sparkline and the invariants.
// Its height follows its content at its width (Height): the rates wrap
// rather than being cut, and a wide panel puts the worker counters in two
// blocks side by side.
type simPanel struct {
	st     *Styles
	keys   *KeyMap
	width  int
	height int

	status     model.SimStatus
	has        bool
	now        time.Time // for the simulator's uptime
	throughput []float64
}

// throughputHistory is how many status reads the sparkline keeps.
const throughputHistory = 120

// maxRateLines is how many lines the rates may wrap onto: two on a
// narrow panel, where the counters need the room, three on a wide one.
func (p *simPanel) maxRateLines() int {
	if p.width < 100 {
		return 2
	}
	return 3
}

// SetSize sets the cells the panel may use.
func (p *simPanel) SetSize(w, h int) { p.width, p.height = w, h }

// ShortHelp is the simulator's most used keys.
func (p *simPanel) ShortHelp() []key.Binding { return []key.Binding{p.keys.Scenario, p.keys.Locks} }

// FullHelp is every simulator key, in one column.
func (p *simPanel) FullHelp() [][]key.Binding {
	k := p.keys
	return [][]key.Binding{{k.Scenario, k.RatesUp, k.RatesDown, k.WorkersUp, k.WorkersDown, k.Locks, k.Fault}}
}

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

// counterCols are the counters' widths at the panel's width: the kind
// column, each number's column, how many blocks side by side, and the
// column titles.
func (p *simPanel) counterCols() (kw, nw, blocks int, heads []string) {
	kw, blocks = 14, 1
	full := []string{"ACQUIRED", "SKIPPED", "TIMEOUTS", "REENTRANT", "ERRORS"}
	short := []string{"acq", "skip", "tmout", "reent", "err"}
	const fullNW, shortNW, gap = 10, 7, 3
	switch {
	case p.width >= 2*(kw+5*fullNW)+gap:
		return kw, fullNW, 2, full
	case p.width >= 2*(kw+5*shortNW)+gap && len(p.status.Workers) > 4:
		return kw, shortNW, 2, short
	}
	nw = max((p.width-kw)/5, 5)
	if nw < 10 {
		return kw, nw, 1, short
	}
	return kw, nw, 1, full
}

// Height is the lines the panel would like at its width: everything
// shown.
func (p *simPanel) Height() int {
	if !p.has {
		return 1
	}
	n := p.summaryHeight()
	_, _, blocks, _ := p.counterCols()
	return n + 1 + (len(p.status.Workers)+blocks-1)/blocks + 1 // column titles, kinds, total
}

// summaryHeight is the lines above the workers' counters: the title, the
// rates, throughput and invariants; what the panel shows at least.
func (p *simPanel) summaryHeight() int {
	if !p.has {
		return 1
	}
	n := 1 + len(p.rateLines()) + 1 // title, rates, throughput
	if !p.combined() {
		n++ // the invariants on a line of their own
	}
	if !p.status.OK() {
		n++
	}
	return n
}

// rateLines are "locks ON · rates: …" wrapped at the panel's width
// between rates, at most maxRateLines; rates beyond are counted.
func (p *simPanel) rateLines() []string {
	st, s := p.st, &p.status
	locks := st.Good.Render("locks ON")
	if !s.LocksEnabled {
		locks = st.Bad.Render("locks OFF (races allowed)")
	}
	sep := st.Dim.Render(" · ")
	lines := []string{locks + st.Dim.Render(" · rates:")}
	has := false // the last line has a rate already
	for i, r := range s.Rates {
		item := Sanitize(r.Name) + " " + simRate(r.Value)
		last := &lines[len(lines)-1]
		join := " "
		if has {
			join = sep
		}
		if width(*last)+width(join)+width(item) <= p.width {
			*last += join + item
			has = true
			continue
		}
		if len(lines) == p.maxRateLines() {
			more := " +" + strconv.Itoa(len(s.Rates)-i) + " more"
			*last = fitLine(*last, p.width-len(more)) + st.Dim.Render(more)
			break
		}
		lines = append(lines, "  "+item)
		has = true
	}
	return lines
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
	lines = append(lines, p.rateLines()...)

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
		room := p.width - len("throughput ") - len(now) - 4 - width(inv)
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
	return fitBlock(append(lines, p.counters(p.height-len(lines))...), p.width, p.height)
}

// counters are the worker counters in room lines: the column titles, as
// many kinds as fit (in one or two blocks), then the total of all.
func (p *simPanel) counters(room int) []string {
	st, s := p.st, &p.status
	if room < 2 {
		return nil
	}
	kw, nw, blocks, heads := p.counterCols()
	blockW := kw + 5*nw
	head := cell("WORKER", kw)
	for _, h := range heads {
		head += rcell(h, nw)
	}
	kinds := slices.Sorted(maps.Keys(s.Workers))
	var sum model.Counters
	for _, k := range kinds {
		sum = sum.Add(s.Workers[k])
	}
	rows := min((len(kinds)+blocks-1)/blocks, room-2)
	shown := min(len(kinds), rows*blocks)
	heading := head
	if blocks == 2 && shown > rows {
		heading = head + "   " + head
	}
	lines := []string{st.ColHead.Render(fitLine(heading, p.width))}
	for r := range rows {
		line := counterRow(st, kinds[r], s.Workers[kinds[r]], kw, nw)
		if j := r + rows; blocks == 2 && j < shown {
			line = cell(line, blockW) + "   " + counterRow(st, kinds[j], s.Workers[kinds[j]], kw, nw)
		}
		lines = append(lines, line)
	}
	label := "total"
	if shown < len(kinds) {
		label = "total (" + strconv.Itoa(len(kinds)) + ")"
	}
	return append(lines, st.Bold.Render(counterRow(st, label, sum, kw, nw)))
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
	// Lost locks count apart from errors in the simulator's report; the
	// panel has no column of their own yet, so they show here, as before.
	if errs := c.Errors + c.Lost; errs > 0 {
		b.WriteString(st.Bad.Render(rcell(fmtCount(errs), nw)))
	} else {
		b.WriteString(rcell("0", nw))
	}
	return b.String()
}
