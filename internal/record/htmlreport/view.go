package htmlreport

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/record/incident"
	"github.com/locktop/locktop/internal/termsafe"
)

// page is what the template draws: every coordinate computed, every
// string from the recording cleaned (the template escapes it).
type page struct {
	CSP                 string
	Server, Sources     string
	Range, Zone, Lasted string
	Snapshots, Damaged  int
	Recorded, Version   string
	Notices             []string

	W, LabelW string
	Axis      []tick
	AxisY     string

	ChartH, ChartPath, ChartLine string
	Peak                         int
	PeakAt                       string

	LanesH, MarksY string
	Marks          []mark
	Episodes       []episodeView
	Lanes          []laneView
	Rest           *restView

	EpisodeRows []episodeRow
	Waits       []row
	Holds       []row
	Holders     []holderRow
	LeaseRows   []row
	Outages     []row
}

type tick struct{ X, Label string }

// mark is an outage span or a lease event over the lanes.
type mark struct {
	Class, X, W, Y, H, Title string
}

type episodeView struct {
	ID, X, W, LabelX, Label, Title string
}

type laneView struct {
	ID, Kind, KindName, Key, Title, Y, H, TextY, Note string
	Bars                                              []barView
	Marks                                             []mark
}

type barView struct {
	Class, X, Y, W, H, Title string
}

type restView struct {
	Y, H, TextY, Note string
	Held, Waited      []mark
}

// row is a table row: its cells, the key's anchor in the timeline.
type row struct {
	Keyed     bool // the first column is Key, linking to Lane
	Key, Lane string
	Cells     []string
}

type episodeRow struct {
	ID    string
	Cells []string
}

type holderRow struct {
	Holder, Application string
	Keys                []keyLink
	Waits               int
	Waited              string
}

type keyLink struct{ Key, Lane string }

// clean makes a string from the database safe to show and short: white
// space becomes one space, and every character termsafe.Control names
// (controls, bidi overrides and isolates) is shown as ⟨U+XXXX⟩, so it
// neither acts on the text around it nor hides. At most n runes are kept.
func clean(s string, n int) string {
	var b strings.Builder
	i := 0
	for _, r := range s {
		if i >= n {
			b.WriteString("…")
			break
		}
		i++
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case termsafe.Control(r):
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Lengths of the strings shown: a query in a bar's tooltip, a name.
const (
	queryRunes = 160
	nameRunes  = 80
)

// classOf turns an outcome into a CSS class from a fixed set.
func classOf(outcome string) string {
	switch outcome {
	case Released, Held, Granted, StillWait, Terminated, SessionEnded, "expired", "recovered", "lost":
		return "o-" + outcome
	case GaveUp:
		return "o-gave-up"
	}
	return "o-other"
}

// kindClass turns a lock kind into a CSS class from a fixed set.
func kindClass(kind string) string {
	switch kind {
	case "advisory", "row", "transactionid", "relation", "redis", "lease":
		return "k-" + kind
	}
	return "k-other"
}

func itoa(n int) string { return strconv.Itoa(n) }

// views of the report's lease events and outages as marks.
func (v *page) marks(rep *incident.Report, sc scale, clock func(time.Time) string) {
	for _, o := range rep.Outages {
		x0, x1 := sc.x(o.From), sc.x(o.To)
		to := clock(o.To)
		if o.Ongoing {
			to = "still failing at the end"
		}
		v.Marks = append(v.Marks, mark{Class: "mark outage", X: num(x0), W: num(max(x1-x0, 1.5)), Y: "2", H: num(marksH - 4),
			Title: fmt.Sprintf("%s outage %s – %s: %s", clean(o.Source, nameRunes), clock(o.From), to, clean(o.Error, queryRunes))})
	}
	for _, e := range rep.Leases {
		v.Marks = append(v.Marks, mark{Class: "mark lease " + classOf(e.Event), X: num(sc.x(e.At)),
			Title: leaseTitle(e, clock)})
	}
}

func leaseTitle(e incident.LeaseEvent, clock func(time.Time) string) string {
	t := fmt.Sprintf("%s %s: %s, held by %s since %s", clock(e.At), clean(e.Key, nameRunes), e.Event, clean(e.Holder, nameRunes), clock(e.HeldFrom))
	if e.By != "" {
		t += ", taken by " + clean(e.By, nameRunes)
	}
	return t
}

// firstEvents are the first MaxEvents of events; beyond, the page says how
// many are left out.
func firstEvents[E any](v *page, events []E, what string) []E {
	if len(events) <= MaxEvents {
		return events
	}
	v.Notices = append(v.Notices, fmt.Sprintf("%d %s: the first %d are marked and listed.", len(events), what, MaxEvents))
	return events[:MaxEvents]
}
