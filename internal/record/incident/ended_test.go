package incident

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// A session that ended is not a lock released or a wait given up. 1 holds
// AGENT 5 with 2 waiting behind it, and is terminated by locktop; 3 holds
// AGENT 6 and lets go (it lives on); 4 holds AGENT 7 and its session ends
// with no proof of why; 6 waits on AGENT 8 behind 5 and is terminated from
// elsewhere. The report said "released" and "gone" for every one of them.
func TestReportTellsTerminatedFromReleased(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var f frames
	for s := range 5 {
		snap := model.Snapshot{Taken: at(s)}
		switch s {
		case 0, 1:
			snap.Locks = []model.Lock{hold(1, 5, at(-10)), wait(2, 5, at(0), 1), hold(3, 6, at(-10)), hold(4, 7, at(-10)),
				hold(5, 8, at(-10)), wait(6, 8, at(0), 5)}
		case 2:
			snap.Locks = []model.Lock{hold(2, 5, at(2)), hold(5, 8, at(-10))}
			snap.Ended = []model.SessionEnd{{PID: 1, Cause: model.EndTerminated, By: model.ByLocktop},
				{PID: 4, Cause: model.EndEnded}, {PID: 6, Cause: model.EndTerminated}}
		default:
			snap.Locks = []model.Lock{hold(2, 5, at(2)), hold(5, 8, at(-10))}
		}
		f = append(f, snap)
	}
	r, err := Build(f, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	waits := map[string]string{}
	for _, w := range r.Waits {
		waits[w.Waiter] = w.Outcome + "/" + w.By
	}
	if waits["2"] != "granted/" || waits["6"] != "terminated/" {
		t.Errorf("waits ended %v, want 2 granted and 6 terminated", waits)
	}
	holds := map[string]string{}
	for _, h := range r.LongestHolds {
		holds[h.Holder+" "+h.Key] = h.Outcome + "/" + h.By
	}
	want := map[string]string{"1 AGENT 5": "terminated/locktop", "3 AGENT 6": "released/", "4 AGENT 7": "ended/", "2 AGENT 5": "held/", "5 AGENT 8": "held/"}
	for k, o := range want {
		if holds[k] != o {
			t.Errorf("hold %s ended %q, want %q (all: %v)", k, holds[k], o, holds)
		}
	}
	blockers := map[string]string{}
	for _, b := range r.Blockers {
		blockers[b.Holder] = b.Outcome + "/" + b.By
	}
	if blockers["1"] != "terminated/locktop" {
		t.Errorf("blockers ended %v, want 1 terminated by locktop", blockers)
	}
	roots := map[string]string{}
	for _, e := range r.Episodes {
		for _, x := range e.Roots {
			roots[x.Holder] = x.Ended + "/" + x.By
		}
	}
	if roots["1"] != "terminated/locktop" || roots["5"] != "/" {
		t.Errorf("root blockers ended %v, want 1 terminated by locktop, 5 not", roots)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b, TextOptions{Location: time.UTC}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"terminated by locktop", "session ended", "released"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("the text report does not say %q:\n%s", s, b.String())
		}
	}
}
