package htmlreport

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/model"
)

// A recording keeps which sessions ended, and the page colours their bars
// apart from a release or a wait given up: 1 holds AGENT 5 and is
// terminated by locktop (2 behind it is granted); 4 waits on AGENT 6 behind
// 3 and its session ends.
func TestTerminatedBarsRecordedAndDrawn(t *testing.T) {
	at := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	adv := func(id int64, pid int32, granted bool, behind ...int32) model.Lock {
		l := model.Lock{Kind: model.KindAdvisory, PID: pid, Database: "app", Mode: model.ModeExclusive, Granted: granted,
			Namespace: "AGENT", EntityID: id, Pair: true, BlockedBy: behind}
		if granted {
			l.HeldSince = at(-10)
		} else {
			l.WaitStart = at(0)
		}
		return l
	}
	var buf bytes.Buffer
	w, err := recording.NewWriter(&buf, recording.Header{Server: "db", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for sec := range 4 {
		s := model.Snapshot{Taken: at(sec), Locks: []model.Lock{adv(5, 1, true), adv(5, 2, false, 1), adv(6, 3, true), adv(6, 4, false, 3)}}
		if sec >= 2 {
			s.Locks = []model.Lock{adv(5, 2, true), adv(6, 3, true)}
		}
		if sec == 2 {
			s.Ended = []model.SessionEnd{{PID: 1, Database: "app", Cause: model.EndTerminated, By: model.ByLocktop}, {PID: 4, Database: "app", Cause: model.EndEnded}}
		}
		if err := w.Write(0, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := recording.Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	_, tl, err := Review(r, "db", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ln := range tl.Lanes {
		for _, b := range ln.Bars {
			got[ln.Key+" "+b.Who] = b.Outcome + "/" + b.By
		}
	}
	want := map[string]string{"AGENT 5 1": "terminated/locktop", "AGENT 5 2": "granted/", "AGENT 6 3": "held/", "AGENT 6 4": "ended/"}
	for k, o := range want {
		if got[k] != o {
			t.Errorf("bar %s ended %q, want %q (all %v)", k, got[k], o, got)
		}
	}
	page := string(rendered(t, r))
	for _, s := range []string{`class="bar hold o-terminated`, `class="bar wait o-ended`, "terminated by locktop", "session ended"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page does not carry %q", s)
		}
	}
}
