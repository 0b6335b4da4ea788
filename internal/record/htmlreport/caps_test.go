package htmlreport

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/incident"
)

// More than a screen shows: lanes beyond MaxLanes go into one band, a
// lane's bars beyond MaxBars are merged and capped, episodes and lease
// events beyond their caps are left out, and the page says so each time.
func TestCapsSaidOnThePage(t *testing.T) {
	from := t0
	to := t0.Add(time.Hour)
	rep := &incident.Report{From: from, To: to}
	tl := &Timeline{From: from, To: to}
	for k := range MaxLanes + 50 {
		ln := &Lane{Key: fmt.Sprintf("AGENT %d", k), Kind: "advisory"}
		for i := range 360 { // a hold every 10 s, and a wait behind each
			s := from.Add(time.Duration(i) * 10 * time.Second)
			ln.Bars = append(ln.Bars,
				Bar{Who: "1", Start: s, End: s.Add(9 * time.Second), Outcome: Released, Count: 1},
				Bar{Wait: true, Who: "2", Start: s.Add(7 * time.Second), End: s.Add(9 * time.Second), Outcome: Granted, Count: 1})
		}
		tl.Lanes = append(tl.Lanes, ln)
	}
	for i := range MaxEpisodes + 10 {
		s := from.Add(time.Duration(i) * 10 * time.Second)
		rep.Episodes = append(rep.Episodes, incident.Episode{Start: s, End: s.Add(2 * time.Second), Keys: []string{"AGENT 0"}, Waited: incident.Seconds(i)})
	}
	for i := range MaxEvents + 1 {
		rep.Leases = append(rep.Leases, incident.LeaseEvent{At: from.Add(time.Duration(i) * time.Second), Key: "map:m1", Kind: "lease", Holder: "w", Event: "expired"})
	}
	v := render(rep, tl, Options{})
	if len(v.Lanes) != MaxLanes || v.Rest == nil || !strings.Contains(v.Rest.Note, "50 more keys") {
		t.Errorf("%d lanes drawn, rest %+v", len(v.Lanes), v.Rest)
	}
	for _, lv := range v.Lanes {
		if len(lv.Bars) > MaxBars || lv.Note == "" {
			t.Fatalf("%s: %d bars drawn, note %q", lv.Key, len(lv.Bars), lv.Note)
		}
	}
	if len(v.Episodes) != MaxEpisodes || len(v.EpisodeRows) != MaxEpisodes || v.EpisodeRows[0].Cells[0] != "E11" {
		t.Errorf("%d episodes drawn, %d listed, the first %v: want the %d with the most wait, in order", len(v.Episodes), len(v.EpisodeRows), v.EpisodeRows[0].Cells[0], MaxEpisodes)
	}
	if len(v.LeaseRows) != MaxEvents {
		t.Errorf("%d lease events listed", len(v.LeaseRows))
	}
	notices := strings.Join(v.Notices, "\n")
	for _, want := range []string{"150 keys had locks", "more than 60 bars", "210 contention episodes", "501 lease expiries"} {
		if !strings.Contains(notices, want) {
			t.Errorf("the page does not say %q:\n%s", want, notices)
		}
	}
}
