package ui

import (
	"strconv"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/record/incident"
	"github.com/locktop/locktop/model"
)

// outcomeEpisode is a contention episode beginning or ending: the unit
// the report reviews, told as it happens.
const outcomeEpisode model.Outcome = "episode"

// episodeEvents feeds the merged snapshot s to the episode tracker and
// tells, one line each, the episodes it began (the keys, the root
// blockers) and those it ended (how long, the peak queue, the time waited
// in all, the roots with their hold). Episodes are what an operator asks
// about afterwards: rare lines, never folded. The episodes under way in
// the first snapshot (first is true) are not told as beginning: they began
// before the dashboard looked (the table shows them); their end is told.
func episodeEvents(x *incident.Episodes, s *model.Snapshot, first bool) []model.Event {
	began, ended := x.Add(*s, s.Taken)
	if first {
		began = nil
	}
	var out []model.Event
	for _, e := range began {
		out = append(out, model.Event{Time: s.Taken, Worker: "locktop", Outcome: outcomeEpisode, Key: episodeKeys(e),
			Detail: "began, " + strconv.Itoa(e.PeakQueue) + " waiting" + roots(e)})
	}
	for _, e := range ended {
		out = append(out, model.Event{Time: s.Taken, Worker: "locktop", Outcome: outcomeEpisode, Key: episodeKeys(e),
			Detail: "ended after " + fmtDur(time.Duration(e.Duration)) + ", peak " + strconv.Itoa(e.PeakQueue) + ", waited " +
				fmtDur(time.Duration(e.Waited)) + roots(e)})
	}
	return out
}

func episodeKeys(e incident.Episode) string { return listOf(e.Keys, 2) }

// roots names an episode's root blockers with their hold: ", root 4242
// report ≥1m16s".
func roots(e incident.Episode) string {
	if len(e.Roots) == 0 {
		return ""
	}
	var parts []string
	for _, r := range e.Roots[:min(len(e.Roots), 2)] {
		p := r.Holder
		if r.Application != "" {
			p += " " + r.Application
		}
		parts = append(parts, p+" ≥"+fmtDur(time.Duration(r.Held)))
	}
	s := ", root " + strings.Join(parts, ", ")
	if n := len(e.Roots) - 2; n > 0 {
		s += " +" + strconv.Itoa(n)
	}
	return Sanitize(s)
}
