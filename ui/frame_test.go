package ui

import (
	"strings"
	"testing"
	"time"
)

// A tick only starts a poll, so the View after it is the frame already
// built (the footer's status set behind the Model's back stays unseen);
// the poll's answer, or a status that expires on the tick, builds the
// screen again.
func TestTickReusesTheFrame(t *testing.T) {
	h := newHarness(t, Options{Interval: time.Second})
	h.start(120, 30)
	first := h.m.View().Content
	h.m.footer.say("behind the model's back", false, t0)
	h.send(h.tick())
	if got := h.m.View().Content; got != first {
		t.Fatalf("the View after a tick was built again:\n%s", got)
	}
	h.send(SnapshotMsg{Snapshot: sample()})
	if got := h.m.View().Content; !strings.Contains(got, "behind the model's back") {
		t.Fatalf("the View after a snapshot was not built again:\n%s", got)
	}
	h.send(h.tick())
	h.m.now = func() time.Time { return t0.Add(time.Hour) } // the status expires on the next tick
	h.send(h.tick())
	if got := h.m.View().Content; strings.Contains(got, "behind the model's back") {
		t.Fatalf("the View after the status expired still shows it:\n%s", got)
	}
}
