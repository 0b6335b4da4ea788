package ui

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// Past its capacity the log keeps the newest groups, and its index no
// more than it keeps.
func TestEventLogRingWraps(t *testing.T) {
	st := DefaultStyles()
	e := eventLog{st: &st}
	e.SetSize(100, 8)
	for i := range 3 * eventCapacity {
		e.Add(model.Event{Time: t0.Add(time.Duration(i) * time.Second), Worker: "hook", Outcome: model.OutcomeAcquired,
			Key: "AGENT " + strconv.Itoa(i)})
	}
	if len(e.ring) != eventCapacity || len(e.index) > eventCapacity {
		t.Fatalf("ring %d, index %d", len(e.ring), len(e.index))
	}
	v := ansi.Strip(e.View())
	if !strings.Contains(v, "AGENT "+strconv.Itoa(3*eventCapacity-1)) || strings.Contains(v, "AGENT 0 ") {
		t.Errorf("not the newest events:\n%s", v)
	}
	if e.group(0).key != "AGENT "+strconv.Itoa(2*eventCapacity) {
		t.Errorf("oldest kept %q", e.group(0).key)
	}
}

// A rare event older than rareKeep is no longer pinned.
func TestEventLogRareExpires(t *testing.T) {
	st := DefaultStyles()
	e := eventLog{st: &st}
	e.SetSize(100, 6)
	e.Add(model.Event{Time: t0, Worker: "stop", Outcome: model.OutcomeTimeout, Key: "AGENT 7"})
	for s := 1; s <= 90; s++ {
		e.Add(demoEvents(t0.Add(time.Duration(s) * time.Second))...)
		v := ansi.Strip(e.View())
		pinned := strings.Contains(v, "timeout")
		if want := time.Duration(s)*time.Second < rareKeep; pinned != want {
			t.Fatalf("after %ds: pinned %v, want %v:\n%s", s, pinned, want, v)
		}
	}
}

// A skip names the holder that caused it once, as model.PIDText words it:
// never "pid 4300 · held by pid 4300".
func TestSkipNamesHolderOnce(t *testing.T) {
	st := DefaultStyles()
	e := eventLog{st: &st}
	e.SetSize(100, 4)
	e.Add(model.Event{Time: t0, Worker: "reaper", Outcome: model.OutcomeSkipped, Key: "AGENT 9", PID: 4300},
		model.Event{Time: t0, Worker: "hook", Outcome: model.OutcomeLost, Key: "AGENT 3", PID: 4301})
	v := ansi.Strip(e.View())
	if strings.Count(v, "4300") != 1 || !strings.Contains(v, "held by pid 4300") {
		t.Errorf("skip line:\n%s", v)
	}
	if !strings.Contains(v, "pid 4301") || strings.Contains(v, "held by pid 4301") {
		t.Errorf("loss line:\n%s", v)
	}
}
