package htmlreport

import (
	"cmp"
	"slices"
	"strconv"
	"time"
)

// What a screen can show: beyond MaxLanes keys the rest are drawn as one
// density band, and a lane with more than MaxBars bars has its bars too
// short to tell apart merged, then only its MaxBars longest drawn. The
// page says so wherever it happens. So do the episodes, lease events and
// outages beyond MaxEpisodes and MaxEvents.
const (
	MaxLanes = 100
	MaxBars  = 60
	// MaxEpisodes is how many episodes are shaded and listed, MaxEvents
	// how many lease events and outages are marked and listed (the first).
	MaxEpisodes = 200
	MaxEvents   = 500
	// maxRows is how many rows of overlapping bars a lane's holds or
	// waits get; more overlap draws over the last row.
	maxRows = 4
	// queuePoints is the queue chart's resolution.
	queuePoints = 500
	// restBuckets is the density band's resolution.
	restBuckets = 200
)

// Geometry of the page's SVG, in its user units (the SVG scales to the
// window's width).
const (
	labelW = 240.0
	plotW  = 1000.0
	svgW   = labelW + plotW + 10
	rowH   = 11.0
	laneP  = 3.0 // a lane's padding above and below
	marksH = 22.0
	axisH  = 16.0
	chartH = 70.0
)

// scale maps times of the span onto the plot's x.
type scale struct {
	from time.Time
	span time.Duration
}

func newScale(from, to time.Time) scale {
	return scale{from: from, span: max(to.Sub(from), time.Second)}
}

// x is t's position, clamped to the plot.
func (s scale) x(t time.Time) float64 {
	f := float64(t.Sub(s.from)) / float64(s.span)
	return labelW + plotW*min(max(f, 0), 1)
}

// unit is the time one user unit of the plot stands for.
func (s scale) unit() time.Duration { return s.span / time.Duration(plotW) }

// num formats a coordinate: one decimal is a tenth of a pixel at the
// page's usual width, and keeps a large page small.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// shown is a lane as drawn: its bars merged and capped.
type shown struct {
	bars    []Bar
	merged  int // bars drawn merged into others
	dropped int // bars not drawn
}

// fit draws at most MaxBars bars of a lane: when it has more, bars of the
// same kind and outcome closer than a unit of the plot are merged, then
// closer than two, four... units, so that every span that had bars still
// shows one (a merged bar is drawn lighter, and says how many it stands
// for). Only if that is not enough are the shortest left out.
func fit(ln *Lane, sc scale) shown {
	out := shown{bars: ln.Bars}
	for gap := sc.unit(); len(out.bars) > MaxBars && gap <= sc.span; gap *= 2 {
		out = merge(ln.Bars, gap)
	}
	if len(out.bars) > MaxBars {
		keep := slices.Clone(out.bars)
		slices.SortStableFunc(keep, func(a, b Bar) int { return cmp.Compare(b.End.Sub(b.Start), a.End.Sub(a.Start)) })
		for _, b := range keep[MaxBars:] {
			out.dropped += b.Count
		}
		keep = keep[:MaxBars]
		slices.SortStableFunc(keep, func(a, b Bar) int { return a.Start.Compare(b.Start) })
		out.bars = keep
	}
	return out
}

// merge joins bars of the same kind and outcome that begin less than gap
// after the previous one ended.
func merge(bars []Bar, gap time.Duration) shown {
	type kind struct {
		wait, root bool
		outcome    string
	}
	var out shown
	last := map[kind]int{} // the last bar of a kind, in out.bars
	for _, b := range bars {
		k := kind{b.Wait, b.Root, b.Outcome}
		if i, ok := last[k]; ok {
			p := &out.bars[i]
			if b.Start.Sub(p.End) < gap {
				p.End = maxTime(p.End, b.End)
				p.Count += b.Count
				out.merged += b.Count
				continue
			}
		}
		out.bars = append(out.bars, b)
		last[k] = len(out.bars) - 1
	}
	return out
}

// pack gives each bar a row: the first whose last bar ended before it
// begins, up to maxRows; it returns the rows and how many were used.
func pack(xs [][2]float64) ([]int, int) {
	rows := make([]int, len(xs))
	var ends []float64
	for i, x := range xs {
		r := -1
		for j, e := range ends {
			if e <= x[0] {
				r = j
				break
			}
		}
		if r < 0 && len(ends) < maxRows {
			ends = append(ends, 0)
			r = len(ends) - 1
		}
		if r < 0 {
			r = 0 // the least-recently ended row
			for j, e := range ends {
				if e < ends[r] {
					r = j
				}
			}
		}
		ends[r] = max(ends[r], x[1])
		rows[i] = r
	}
	return rows, len(ends)
}

// ticks are the time axis's marks: about eight, at round times.
func ticks(sc scale, from, to time.Time, loc *time.Location) []tick {
	steps := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if sc.span/s <= 8 {
			step = s
			break
		}
	}
	layout := "15:04:05"
	if step >= time.Minute {
		layout = "15:04"
	}
	var out []tick
	for t := from.Truncate(step); !t.After(to); t = t.Add(step) {
		if t.Before(from) {
			continue
		}
		out = append(out, tick{X: num(sc.x(t)), Label: t.In(loc).Format(layout)})
	}
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
