package ui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/locktop/locktop/model"
)

// Outcomes the dashboard itself reports, beside the simulator's: what it
// sees change between snapshots (monitor only), and its own notes.
const (
	outcomeWaits    model.Outcome = "waits"
	outcomeGranted  model.Outcome = "granted"
	outcomeReleased model.Outcome = "released"
	outcomeLeft     model.Outcome = "left"
	outcomeEnded    model.Outcome = "ended" // its session ended: terminated, not released
	outcomeMore     model.Outcome = "more"  // changes beyond what one refresh logs
	outcomeInfo     model.Outcome = "info"  // the dashboard's own notes
	// outcomeContained is a lost lock whose section did no harm (see
	// model.Event.Contained): routine, not an alarm.
	outcomeContained model.Outcome = "contained"
)

// rare reports the outcomes an operator must not miss: each is a line of
// its own, never folded into others, and stays on screen for rareKeep even
// when the common ones stream past it.
func rare(o model.Outcome) bool {
	switch o {
	case model.OutcomeTimeout, model.OutcomeLost, model.OutcomeViolation, model.OutcomeError, model.OutcomeDeadlock,
		model.OutcomePhantom, model.OutcomeReentrant, model.OutcomeCanceled, outcomeInfo, outcomeEpisode:
		return true
	}
	return false
}

// rareKeep is how long a rare event stays on screen at least.
const rareKeep = time.Minute

// evGroup is the events of one kind (worker and outcome) on one key in
// one second, or one rare event (and its exact repeats in that second).
type evGroup struct {
	sec     int64
	worker  string
	outcome model.Outcome
	key     string

	first            time.Time
	n                int
	minWait, maxWait time.Duration
	pid              int32  // 0 when the events name different pids
	detail           string // the last event's
	mixed            bool   // the events' details differ
}

// groupKey is what an evGroup aggregates by.
type groupKey struct {
	sec     int64
	worker  string
	outcome model.Outcome
	key     string
}

func (g *evGroup) id() groupKey { return groupKey{g.sec, g.worker, g.outcome, g.key} }

func newGroup(ev *model.Event) evGroup {
	return evGroup{sec: ev.Time.Unix(), worker: ev.Worker, outcome: ev.Outcome, key: ev.Key, first: ev.Time,
		n: 1, minWait: ev.Wait, maxWait: ev.Wait, pid: ev.PID, detail: ev.Detail}
}

func (g *evGroup) add(ev *model.Event) {
	g.n++
	g.minWait, g.maxWait = min(g.minWait, ev.Wait), max(g.maxWait, ev.Wait)
	if ev.PID != g.pid {
		g.pid = 0
	}
	if ev.Detail != g.detail {
		g.mixed, g.detail = true, ev.Detail
	}
}

// eventLog keeps the recent events, aggregated, and shows the newest at
// the bottom. The demo sends some 30 events a second, more than anyone
// reads, so repeats are aggregated per kind and key per second ("hook
// acquired AGENT 3 ×6"), and a second that still has more lines than the
// panel can show readably (a fifth of its height, two at least) folds its
// kinds together, the biggest first, the rest summed on one line. Rare
// events (timeouts, losses, violations, errors, the dashboard's own notes)
// are never folded and stay pinned at the top for rareKeep.
type eventLog struct {
	noKeys
	st     *Styles
	width  int
	height int

	ring   []evGroup // common events, aggregated, in arrival order
	next   int       // where the next group goes once the ring is full
	index  map[groupKey]int
	rare   []evGroup // rare events, in arrival order
	total  int64
	newest time.Time
	counts [rateWindow + 2]secCount // events per second, for the rate
}

// secCount is the events of one second.
type secCount struct {
	sec int64
	n   int
}

// Capacities: groups and rare events kept.
const (
	eventCapacity = 500
	rareCapacity  = 100
	rateWindow    = 5 // seconds the rate in the title is averaged over
)

// SetSize sets the cells the log may use.
func (e *eventLog) SetSize(w, h int) { e.width, e.height = w, h }

// Add takes events.
func (e *eventLog) Add(evs ...model.Event) {
	if e.index == nil {
		e.index = make(map[groupKey]int)
	}
	for i := range evs {
		ev := &evs[i]
		if ev.Outcome == model.OutcomeLost && ev.Contained {
			c := *ev
			c.Outcome = outcomeContained
			ev = &c
		}
		e.total++
		if ev.Time.After(e.newest) {
			e.newest = ev.Time
		}
		sec := ev.Time.Unix()
		if c := &e.counts[sec%int64(len(e.counts))]; c.sec == sec {
			c.n++
		} else {
			*c = secCount{sec, 1}
		}
		if rare(ev.Outcome) {
			e.addRare(ev)
			continue
		}
		g := newGroup(ev)
		if j, ok := e.index[g.id()]; ok && e.ring[j].id() == g.id() {
			e.ring[j].add(ev)
			continue
		}
		slot := len(e.ring)
		if slot < eventCapacity {
			e.ring = append(e.ring, g)
		} else {
			slot = e.next
			old := e.ring[slot].id()
			if e.index[old] == slot {
				delete(e.index, old)
			}
			e.ring[slot] = g
			e.next = (e.next + 1) % eventCapacity
		}
		e.index[g.id()] = slot
	}
}

func (e *eventLog) addRare(ev *model.Event) {
	g := newGroup(ev)
	if n := len(e.rare); n > 0 && e.rare[n-1].id() == g.id() && e.rare[n-1].detail == g.detail {
		e.rare[n-1].add(ev)
		return
	}
	if len(e.rare) == rareCapacity {
		e.rare = slices.Delete(e.rare, 0, 1)
	}
	e.rare = append(e.rare, g)
}

// group returns the common group i, oldest first.
func (e *eventLog) group(i int) *evGroup {
	if len(e.ring) < eventCapacity {
		return &e.ring[i]
	}
	return &e.ring[(e.next+i)%eventCapacity]
}

// rate is the events per second over the last full seconds.
func (e *eventLog) rate() float64 {
	now := e.newest.Unix()
	n := 0
	for _, c := range e.counts {
		if c.sec < now && c.sec >= now-rateWindow {
			n += c.n
		}
	}
	return float64(n) / rateWindow
}

// evLine is one line of the log: a group, a fold of groups, or a sum.
type evLine struct {
	sec     int64
	worker  string
	outcome model.Outcome
	body    []segment
	rare    bool
	g       *evGroup // the rare group this line is, for pinning
}

// View renders the title and the newest lines that fit.
func (e *eventLog) View() string {
	if e.width <= 0 || e.height <= 0 {
		return ""
	}
	title := fmtCount(e.total) + " so far"
	if r := e.rate(); r > 0 {
		title += " · " + fmtRate(r) + "/s"
	}
	lines := []string{rule(e.st, "Events", title, e.width)}
	room := e.height - 1
	shown := e.lines(room)
	if len(shown) == 0 {
		lines = append(lines, e.st.Dim.Render("  nothing yet"))
	}
	ww := 0
	for _, l := range shown {
		ww = max(ww, width(l.worker))
	}
	ww = min(ww, 14)
	for _, l := range shown {
		lines = append(lines, e.render(&l, ww))
	}
	return fitBlock(lines, e.width, e.height)
}

// lines picks what fits in room lines: the newest lines, and above them
// the rare events of the last rareKeep that scrolled out (a third of the
// room at most).
func (e *eventLog) lines(room int) []evLine {
	if room <= 0 {
		return nil
	}
	all := e.stream(room)
	cut := func(n int) []evLine { return all[max(len(all)-n, 0):] }
	pinned := e.outOf(cut(room))
	if len(pinned) == 0 {
		return cut(room)
	}
	n := min(len(pinned), max(room/3, 1))
	stream := cut(room - n)
	pinned = e.outOf(stream)
	return append(pinned[len(pinned)-min(n, len(pinned)):], stream...)
}

// outOf returns the rare events of the last rareKeep that lines do not
// show, oldest first.
func (e *eventLog) outOf(lines []evLine) []evLine {
	in := map[*evGroup]bool{}
	for _, l := range lines {
		if l.g != nil {
			in[l.g] = true
		}
	}
	var out []evLine
	for i := range e.rare {
		g := &e.rare[i]
		if !in[g] && e.newest.Sub(g.first) < rareKeep {
			out = append(out, e.groupLine(g))
		}
	}
	return out
}

// stream is the newest lines, oldest first, at most enough to fill room:
// second by second from the newest, each second's rare events as they are
// and its common groups folded to the per-second budget.
func (e *eventLog) stream(room int) []evLine {
	budget := max(room/5, 2)
	gi, ri := len(e.ring)-1, len(e.rare)-1
	var out [][]evLine // per second, newest second first
	total := 0
	for total < room && (gi >= 0 || ri >= 0) {
		sec := int64(-1 << 62)
		if gi >= 0 {
			sec = e.group(gi).sec
		}
		if ri >= 0 {
			sec = max(sec, e.rare[ri].sec)
		}
		var common []*evGroup
		for ; gi >= 0 && e.group(gi).sec == sec; gi-- {
			common = append(common, e.group(gi))
		}
		var lines []evLine
		for ; ri >= 0 && e.rare[ri].sec == sec; ri-- {
			lines = append(lines, e.groupLine(&e.rare[ri]))
		}
		slices.Reverse(common)
		slices.Reverse(lines)
		// A second's common lines before its rare ones: when the panel is
		// full, the common ones go first.
		lines = append(e.fold(common, budget), lines...)
		out = append(out, lines)
		total += len(lines)
	}
	var flat []evLine
	for i := len(out) - 1; i >= 0; i-- {
		flat = append(flat, out[i]...)
	}
	return flat
}

// groupLine is one group on a line of its own.
func (e *eventLog) groupLine(g *evGroup) evLine {
	l := evLine{sec: g.sec, worker: g.worker, outcome: g.outcome, rare: rare(g.outcome)}
	if l.rare {
		l.g = g
	}
	key := Sanitize(g.key)
	if g.n > 1 {
		key = strings.TrimSpace(key + " ×" + strconv.Itoa(g.n))
	}
	if key != "" {
		l.body = append(l.body, segment{key, 0})
	}
	if d := detailText(g.detail, g.mixed); d != "" {
		l.body = append(l.body, segment{d, 1})
	}
	if w := waitText(g.minWait, g.maxWait); w != "" {
		l.body = append(l.body, segment{w, 2})
	}
	if pid := model.PIDText(g.outcome, g.pid); pid != "" && g.worker != pid { // a session without a name is its pid already
		l.body = append(l.body, segment{pid, 3})
	}
	return l
}

// detailText is a group's detail: the one all its events share, or the
// last one's when they differ.
func detailText(last string, mixed bool) string {
	switch {
	case last == "":
		return ""
	case mixed:
		return "last: " + Sanitize(last)
	}
	return Sanitize(last)
}

// waitText is a wait or a range of waits: "after 20ms", "after 20ms–98ms".
func waitText(lo, hi time.Duration) string {
	if hi <= 0 {
		return ""
	}
	if a, b := fmtDur(lo), fmtDur(hi); a != b {
		return "after " + a + "–" + b
	}
	return "after " + fmtDur(hi)
}

// evKind is the groups of one kind (worker and outcome) in one second.
type evKind struct {
	worker  string
	outcome model.Outcome
	groups  []*evGroup
	n       int
}

// fold turns one second's common groups into at most budget lines: each
// group its own line when they fit; else one line per kind (worker and
// outcome), its keys listed, the biggest kinds first, and the kinds beyond
// the budget summed on the last line.
func (e *eventLog) fold(groups []*evGroup, budget int) []evLine {
	if len(groups) <= budget {
		out := make([]evLine, 0, len(groups))
		for _, g := range groups {
			out = append(out, e.groupLine(g))
		}
		return out
	}
	var kinds []*evKind
	for _, g := range groups {
		i := slices.IndexFunc(kinds, func(k *evKind) bool { return k.worker == g.worker && k.outcome == g.outcome })
		if i < 0 {
			kinds = append(kinds, &evKind{worker: g.worker, outcome: g.outcome})
			i = len(kinds) - 1
		}
		kinds[i].groups = append(kinds[i].groups, g)
		kinds[i].n += g.n
	}
	slices.SortStableFunc(kinds, func(a, b *evKind) int { return cmp.Compare(b.n, a.n) })
	var out []evLine
	for i, k := range kinds {
		if i == budget-1 && len(kinds) > budget {
			out = append(out, sumLine(groups[0].sec, kinds[i:]))
			break
		}
		if len(k.groups) == 1 {
			out = append(out, e.groupLine(k.groups[0]))
			continue
		}
		out = append(out, kindLine(k))
	}
	return out
}

// kindLine is the groups of one kind on one line: "×12 · AGENT 1 ×5,
// AGENT 3 ×4, AGENT 2 ×3", the keys with the most events first.
func kindLine(k *evKind) evLine {
	g0 := k.groups[0]
	l := evLine{sec: g0.sec, worker: k.worker, outcome: k.outcome}
	sorted := slices.Clone(k.groups)
	slices.SortStableFunc(sorted, func(a, b *evGroup) int { return cmp.Compare(b.n, a.n) })
	keys := make([]string, 0, len(sorted))
	lo, hi := g0.minWait, g0.maxWait
	detail, mixed := k.groups[len(k.groups)-1].detail, false
	for _, g := range sorted {
		key := Sanitize(g.key)
		if g.n > 1 {
			key += " ×" + strconv.Itoa(g.n)
		}
		keys = append(keys, key)
		lo, hi = min(lo, g.minWait), max(hi, g.maxWait)
		mixed = mixed || g.mixed || g.detail != detail
	}
	l.body = append(l.body, segment{"×" + strconv.Itoa(k.n) + " " + listOf(keys, 3), 0})
	if d := detailText(detail, mixed); d != "" {
		l.body = append(l.body, segment{d, 1})
	}
	if w := waitText(lo, hi); w != "" {
		l.body = append(l.body, segment{w, 2})
	}
	return l
}

// sumLine sums kinds on one line, by outcome: "+17 more: skipped 11
// (summariser 6, poller 5) · note 5 (deferred_stop)".
func sumLine(sec int64, kinds []*evKind) evLine {
	type sum struct {
		outcome model.Outcome
		n       int
		workers []string
	}
	var sums []*sum
	total := 0
	for _, k := range kinds {
		i := slices.IndexFunc(sums, func(s *sum) bool { return s.outcome == k.outcome })
		if i < 0 {
			sums = append(sums, &sum{outcome: k.outcome})
			i = len(sums) - 1
		}
		sums[i].n += k.n
		sums[i].workers = append(sums[i].workers, Sanitize(k.worker)+" "+strconv.Itoa(k.n))
		total += k.n
	}
	l := evLine{sec: sec}
	for i, s := range sums {
		name := string(s.outcome)
		if name == "" {
			name = "note"
		}
		text := name + " " + strconv.Itoa(s.n) + " (" + listOf(s.workers, 3) + ")"
		if i == 0 {
			text = "+" + strconv.Itoa(total) + " more: " + text
		}
		l.body = append(l.body, segment{text, min(i, 1)})
	}
	return l
}

// listOf joins up to n items, then says how many more: "a, b, c +4".
func listOf(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + " +" + strconv.Itoa(len(items)-n)
}

// render renders a line in the log's width: the time, the worker, the
// outcome, then the body, whose least needed parts go first when it is
// narrow.
func (e *eventLog) render(l *evLine, ww int) string {
	var b strings.Builder
	b.WriteString(e.st.Dim.Render(time.Unix(l.sec, 0).In(e.newest.Location()).Format("15:04:05")))
	b.WriteByte(' ')
	b.WriteString(cell(Sanitize(l.worker), ww))
	b.WriteByte(' ')
	b.WriteString(e.outcomeStyle(l.outcome).Render(cell(string(l.outcome), 9)))
	b.WriteByte(' ')
	b.WriteString(fitSegments(l.body, " · ", e.width-ww-20))
	return b.String()
}

func (e *eventLog) outcomeStyle(o model.Outcome) lipgloss.Style {
	switch o {
	case model.OutcomeAcquired, outcomeGranted:
		return e.st.Holds
	case model.OutcomeTimeout, model.OutcomePhantom, model.OutcomeCanceled, outcomeLeft, outcomeWaits:
		return e.st.Waits
	case model.OutcomeReentrant, outcomeContained:
		return e.st.Note
	case model.OutcomeError, model.OutcomeLost, model.OutcomeViolation, model.OutcomeDeadlock, outcomeEnded:
		return e.st.Bad
	case outcomeInfo:
		return e.st.Status
	case outcomeEpisode:
		return e.st.Waits
	}
	return e.st.Dim
}
