package htmlreport

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/record/incident"
)

//go:embed page.html.tmpl
var pageText string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"split": func(s string) []string { return strings.Split(s, ",") },
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
}).Parse(pageText))

// ContentSecurityPolicy is the page's policy (in a meta element, and a
// header where it is served): styles inline, nothing else, so no script
// runs and nothing is loaded whatever the page holds.
const ContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'"

// Options say what the page's header tells beside the report, and in
// which time zone its times are shown.
type Options struct {
	// Location of the times shown; nil means UTC.
	Location *time.Location
	// Sources are the recording's sources (Header.Sources).
	Sources []string
	// Recorded is the locktop version that wrote the recording; Version
	// the one that renders the page.
	Recorded, Version string
}

// Write renders the report and its timeline as one HTML page.
func Write(w io.Writer, rep *incident.Report, tl *Timeline, o Options) error {
	v := render(rep, tl, o)
	v.CSP = ContentSecurityPolicy
	var b strings.Builder
	if err := pageTmpl.Execute(&b, v); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func render(rep *incident.Report, tl *Timeline, o Options) *page {
	loc := o.Location
	if loc == nil {
		loc = time.UTC
	}
	clock := func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.In(loc).Format("15:04:05")
	}
	sc := newScale(tl.From, tl.To)
	v := &page{
		Server: clean(rep.Server, nameRunes), Sources: clean(strings.Join(o.Sources, ", "), nameRunes*2),
		Range: rep.From.In(loc).Format("2006-01-02 15:04:05") + " – " + clock(rep.To), Zone: rep.From.In(loc).Format("MST -07:00"),
		Lasted: incident.Dur(rep.To.Sub(rep.From)), Snapshots: rep.Snapshots, Damaged: rep.Damaged,
		Recorded: incident.OrDash(clean(o.Recorded, nameRunes)), Version: incident.OrDash(clean(o.Version, nameRunes)),
		W: num(svgW), LabelW: num(labelW),
		ChartH: num(chartH), Peak: rep.Queue.Peak, PeakAt: clock(rep.Queue.PeakAt),
	}
	capped := *rep
	capped.Leases = firstEvents(v, rep.Leases, "lease expiries, recoveries and losses")
	capped.Outages = firstEvents(v, rep.Outages, "source outages")
	rep = &capped
	v.Axis = ticks(sc, tl.From, tl.To, loc)
	v.chart(tl, sc)
	v.marks(rep, sc, clock)

	// Lanes, below the marks' track.
	anchors := map[string]string{} // kind and key → the lane drawn
	y := marksH
	v.MarksY = num(marksH / 2)
	for i, ln := range tl.Lanes {
		if i >= MaxLanes {
			break
		}
		lv, h := v.lane(ln, i, y, sc, clock)
		anchors[ln.Kind+"\x00"+ln.Key] = lv.ID
		if _, ok := anchors[ln.Key]; !ok {
			anchors[ln.Key] = lv.ID // the holders' table names keys without their kind
		}
		for _, e := range rep.Leases {
			if e.Key == ln.Key && e.Kind == ln.Kind {
				lv.Marks = append(lv.Marks, mark{Class: "tick lease " + classOf(e.Event), X: num(sc.x(e.At) - 0.75), W: "1.5", Y: num(y), H: num(h), Title: leaseTitle(e, clock)})
			}
		}
		v.Lanes = append(v.Lanes, lv)
		y += h
	}
	if len(tl.Lanes) > MaxLanes {
		v.Rest = rest(tl.Lanes[MaxLanes:], y, sc)
		v.Notices = append(v.Notices, fmt.Sprintf("%d keys had locks; the %d with the most waiting (then the longest held) have a lane each, and the other %d are drawn together as one band at the bottom: a screen cannot show more lanes than that.",
			len(tl.Lanes), MaxLanes, len(tl.Lanes)-MaxLanes))
		y += restH
	}
	merged := 0
	for _, lv := range v.Lanes {
		if lv.Note != "" {
			merged++
		}
	}
	if merged > 0 {
		v.Notices = append(v.Notices, fmt.Sprintf("%d lanes had more than %d bars: in them, bars too close to tell apart at this width are merged into one, drawn lighter (its tooltip says how many it stands for); the lane's label says \"merged\".",
			merged, MaxBars))
	}
	v.LanesH = num(y + 4)
	v.AxisY = num(y + 14)
	shownEps := v.episodesShown(rep.Episodes)
	for _, i := range shownEps {
		e := rep.Episodes[i]
		x0, x1 := sc.x(e.Start), sc.x(e.End)
		to := clock(e.End)
		if e.Ongoing {
			to = "ongoing"
		}
		var roots []string
		for _, r := range e.Roots {
			roots = append(roots, clean(r.Holder, nameRunes))
		}
		id := "ep-" + itoa(i+1)
		v.Episodes = append(v.Episodes, episodeView{ID: id, X: num(x0), W: num(max(x1-x0, 1)), LabelX: num(x0 + 2), Label: "E" + itoa(i+1),
			Title: fmt.Sprintf("episode E%d %s – %s (%s): %d waits on %s; root blockers %s", i+1, clock(e.Start), to, incident.Dur(time.Duration(e.Duration)),
				e.Waits, clean(strings.Join(e.Keys, ", "), queryRunes), incident.OrDash(strings.Join(roots, ", ")))})
		var rs []string
		for _, r := range e.Roots {
			root := fmt.Sprintf("%s %s ≥%s", clean(r.Holder, nameRunes), incident.OrDash(clean(r.Application, nameRunes)), incident.Dur(time.Duration(r.Held)))
			if r.Ended != "" {
				root += " " + incident.Words(r.Ended, r.By)
			}
			rs = append(rs, root)
		}
		v.EpisodeRows = append(v.EpisodeRows, episodeRow{ID: id, Cells: []string{"E" + itoa(i+1), clock(e.Start), to, incident.Dur(time.Duration(e.Duration)),
			clean(strings.Join(e.Keys, ", "), queryRunes), strings.Join(e.Kinds, ", "), itoa(e.PeakQueue), itoa(e.Waits), incident.Dur(time.Duration(e.Waited)), incident.OrDash(strings.Join(rs, "; "))}})
	}
	v.tables(rep, anchors, clock)
	return v
}

// episodesShown are the indices of the episodes drawn and listed, in
// order: all of them, or the MaxEpisodes with the most total wait (the
// page says so).
func (v *page) episodesShown(eps []incident.Episode) []int {
	idx := make([]int, len(eps))
	for i := range idx {
		idx[i] = i
	}
	if len(eps) <= MaxEpisodes {
		return idx
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(eps[b].Waited, eps[a].Waited) })
	idx = idx[:MaxEpisodes]
	slices.Sort(idx)
	v.Notices = append(v.Notices, fmt.Sprintf("%d contention episodes: the %d with the most total wait are shaded and listed (numbered in the order of all of them).", len(eps), MaxEpisodes))
	return idx
}

// restH is the height of the band of keys without a lane of their own.
const restH = 34.0

// lane lays out one key's bars: holds in the upper rows, waits below.
func (v *page) lane(ln *Lane, i int, y float64, sc scale, clock func(time.Time) string) (laneView, float64) {
	sh := fit(ln, sc)
	var hx, wx [][2]float64
	var hb, wb []Bar
	for _, b := range sh.bars {
		x0 := sc.x(b.Start)
		x1 := max(sc.x(b.End), x0+1) // a bar shorter than a unit is still seen
		if b.Wait {
			wx, wb = append(wx, [2]float64{x0, x1}), append(wb, b)
		} else {
			hx, hb = append(hx, [2]float64{x0, x1}), append(hb, b)
		}
	}
	hr, nh := pack(hx)
	wr, nw := pack(wx)
	lv := laneView{ID: "lane-" + itoa(i+1), Kind: kindClass(ln.Kind), KindName: clean(ln.Kind, 16), Key: clean(ln.Key, 36), Y: num(y)}
	lv.Title = fmt.Sprintf("%s (%s): %d bars, %d waits, waited %s, held %s", clean(ln.Key, nameRunes), ln.Kind, len(ln.Bars), ln.Waits, incident.Dur(ln.Waited), incident.Dur(ln.Held))
	if sh.merged > 0 || sh.dropped > 0 {
		lv.Note = "merged"
		lv.Title += fmt.Sprintf("; too many to draw one by one: %d merged into the bars beside them (drawn lighter)", sh.merged)
		if sh.dropped > 0 {
			lv.Title += fmt.Sprintf(", %d of the shortest not drawn", sh.dropped)
		}
	}
	top := y + laneP
	add := func(bs []Bar, xs [][2]float64, rows []int, base float64, h float64) {
		for j, b := range bs {
			cls := "bar hold"
			if b.Wait {
				cls = "bar wait"
			}
			cls += " " + classOf(b.Outcome)
			if b.Root {
				cls += " root"
			}
			if b.Count > 1 {
				cls += " merged"
			}
			lv.Bars = append(lv.Bars, barView{Class: cls, X: num(xs[j][0]), W: num(xs[j][1] - xs[j][0]),
				Y: num(base + float64(rows[j])*rowH), H: num(h), Title: barTitle(b, ln, clock)})
		}
	}
	add(hb, hx, hr, top, rowH-1)
	add(wb, wx, wr, top+float64(nh)*rowH, rowH-3)
	h := max(float64(nh+nw), 1)*rowH + 2*laneP
	lv.H = num(h)
	lv.TextY = num(y + min(h/2, laneP+rowH) + 3)
	return lv, h
}

func barTitle(b Bar, ln *Lane, clock func(time.Time) string) string {
	what := "held"
	if b.Wait {
		what = "waited for"
	}
	var s strings.Builder
	if b.Count > 1 {
		fmt.Fprintf(&s, "%d %s, merged (too short to draw apart), %s – %s, the first by %s", b.Count, map[bool]string{false: "holds", true: "waits"}[b.Wait],
			clock(b.Start), clock(b.End), clean(b.Who, nameRunes))
	} else {
		fmt.Fprintf(&s, "%s %s %s %s – %s (%s): %s", clean(b.Who, nameRunes), what, clean(ln.Key, nameRunes), clock(b.Start), clock(b.End), incident.Dur(b.End.Sub(b.Start)), incident.Words(b.Outcome, b.By))
	}
	if b.Root {
		s.WriteString("; root blocker")
	}
	if b.Application != "" {
		s.WriteString("\napplication: " + clean(b.Application, nameRunes))
	}
	if b.Mode != "" {
		s.WriteString("\nmode: " + clean(b.Mode, nameRunes))
	}
	if b.Query != "" {
		s.WriteString("\nquery: " + clean(b.Query, queryRunes))
	}
	return s.String()
}

// rest is the band of the keys beyond MaxLanes: how many of them were
// held, and waited for, in each of restBuckets spans.
func rest(lanes []*Lane, y float64, sc scale) *restView {
	held := make([]int, restBuckets)
	waited := make([]int, restBuckets)
	bucket := func(x float64) int { return min(max(int((x-labelW)/plotW*restBuckets), 0), restBuckets-1) }
	for _, ln := range lanes {
		var h, w [restBuckets]bool
		for _, b := range ln.Bars {
			for k := bucket(sc.x(b.Start)); k <= bucket(sc.x(b.End)); k++ {
				if b.Wait {
					w[k] = true
				} else {
					h[k] = true
				}
			}
		}
		for k := range restBuckets {
			if h[k] {
				held[k]++
			}
			if w[k] {
				waited[k]++
			}
		}
	}
	r := &restView{Y: num(y), H: num(restH), TextY: num(y + 14),
		Note: fmt.Sprintf("%d more keys", len(lanes))}
	bw := plotW / restBuckets
	band := func(counts []int, top float64, what string) []mark {
		var out []mark
		for k, n := range counts {
			if n == 0 {
				continue
			}
			out = append(out, mark{Class: fmt.Sprintf("d%d", min(1+n*4/len(lanes), 4)), X: num(labelW + float64(k)*bw), W: num(bw), Y: num(top), H: "12",
				Title: fmt.Sprintf("%d of these %d keys %s", n, len(lanes), what)})
		}
		return out
	}
	r.Held = band(held, y+4, "held")
	r.Waited = band(waited, y+18, "waited for")
	return r
}

// chart draws the queue: the most waiting rows in each of queuePoints
// spans, as a filled step line.
func (v *page) chart(tl *Timeline, sc scale) {
	n := min(queuePoints, max(len(tl.Queue), 1))
	top := make([]int, n)
	for _, p := range tl.Queue {
		k := min(max(int((sc.x(p.At)-labelW)/plotW*float64(n)), 0), n-1)
		top[k] = max(top[k], p.N)
	}
	peak := max(slices.Max(top), 1)
	yOf := func(q int) float64 { return chartH - 2 - (chartH-8)*float64(q)/float64(peak) }
	var line strings.Builder
	w := plotW / float64(n)
	for k, q := range top {
		x := labelW + float64(k)*w
		if k == 0 {
			fmt.Fprintf(&line, "M%s %s", num(x), num(yOf(q)))
		} else {
			fmt.Fprintf(&line, "V%s", num(yOf(q)))
		}
		fmt.Fprintf(&line, "H%s", num(x+w))
	}
	v.ChartLine = line.String()
	v.ChartPath = fmt.Sprintf("M%s %s", num(labelW), num(yOf(0))) + "L" + strings.TrimPrefix(line.String(), "M") +
		fmt.Sprintf("V%sZ", num(yOf(0)))
}

// tables fills the report's tables, each key linking to its lane.
func (v *page) tables(rep *incident.Report, anchors map[string]string, clock func(time.Time) string) {
	link := func(kind, key string) string {
		if a, ok := anchors[kind+"\x00"+key]; ok {
			return a
		}
		if v.Rest != nil {
			return "rest"
		}
		return ""
	}
	for _, w := range rep.Waits {
		v.Waits = append(v.Waits, row{Keyed: true, Key: clean(w.Key, nameRunes), Lane: link(w.Kind, w.Key), Cells: []string{
			w.Kind, clean(w.Waiter, nameRunes), incident.OrDash(clean(w.Application, nameRunes)), "≥" + incident.Dur(time.Duration(w.Waited)),
			clock(w.Start), clock(w.End), incident.OrDash(clean(strings.Join(w.Behind, ", "), nameRunes)), incident.Words(w.Outcome, w.By)}})
	}
	for _, h := range rep.LongestHolds {
		v.Holds = append(v.Holds, row{Keyed: true, Key: clean(h.Key, nameRunes), Lane: link(h.Kind, h.Key), Cells: []string{
			h.Kind, clean(h.Holder, nameRunes), incident.OrDash(clean(h.Application, nameRunes)), "≥" + incident.Dur(time.Duration(h.Held)),
			clock(h.Since), clock(h.Until), itoa(h.Waiters), incident.OrDash(incident.Words(h.Outcome, h.By))}})
	}
	for _, h := range rep.Holders {
		hr := holderRow{Holder: clean(h.Holder, nameRunes), Application: incident.OrDash(clean(h.Application, nameRunes)), Waits: h.Waits, Waited: incident.Dur(time.Duration(h.Waited))}
		for _, k := range h.Keys {
			a, ok := anchors[k]
			if !ok && v.Rest != nil {
				a = "rest"
			}
			hr.Keys = append(hr.Keys, keyLink{Key: clean(k, nameRunes), Lane: a})
		}
		v.Holders = append(v.Holders, hr)
	}
	for _, e := range rep.Leases {
		v.LeaseRows = append(v.LeaseRows, row{Keyed: true, Key: clean(e.Key, nameRunes), Lane: link(e.Kind, e.Key), Cells: []string{
			clock(e.At), e.Kind, clean(e.Holder, nameRunes), e.Event, incident.OrDash(clean(e.By, nameRunes)), clock(e.HeldFrom)}})
	}
	for _, o := range rep.Outages {
		to := clock(o.To)
		if o.Ongoing {
			to = "ongoing"
		}
		v.Outages = append(v.Outages, row{Cells: []string{clean(o.Source, nameRunes), clock(o.From), to, clean(o.Error, queryRunes)}})
	}
}
