package ui

import (
	"errors"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
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

// Another source's answer that shows nothing new (no locks before or now,
// the same health) keeps the frame already built, as a tick does; one
// with locks, parts that did not answer, or a failure builds it again.
func TestBareAnswerReusesTheFrame(t *testing.T) {
	lease := &fakeLockSource{name: "lease", results: []SnapshotMsg{{Snapshot: model.Snapshot{Taken: t0}}}}
	h := newHarness(t, Options{Interval: time.Second, Sources: []source.Source{lease}})
	h.start(120, 30)
	first := h.m.View().Content
	hidden := func() bool { return !strings.Contains(h.m.View().Content, "behind the model's back") }
	h.m.footer.say("behind the model's back", false, t0)
	h.send(SnapshotMsg{Source: 1, Snapshot: model.Snapshot{Taken: t0.Add(time.Second), Latency: time.Millisecond}})
	if got := h.m.View().Content; got != first {
		t.Fatalf("the View after a bare answer was built again:\n%s", got)
	}
	if got := h.m.merged.Sources[1].Taken; !got.Equal(t0.Add(time.Second)) {
		t.Errorf("the bare answer's time is not kept: %v", got)
	}
	for name, s := range map[string]model.Snapshot{
		"locks":   redisLocks(),
		"partial": {Taken: t0, Partial: []string{"10.0.0.2:7000: connection refused"}},
	} {
		h.send(SnapshotMsg{Source: 1, Snapshot: model.Snapshot{Taken: t0}}) // bare again
		_ = h.m.View()
		h.m.footer.say("behind the model's back", false, t0)
		h.send(SnapshotMsg{Source: 1, Snapshot: s})
		if hidden() {
			t.Errorf("the View after an answer with %s was not built again", name)
		}
	}
	h.send(SnapshotMsg{Source: 1, Snapshot: model.Snapshot{Taken: t0}})
	_ = h.m.View()
	h.m.footer.say("behind the model's back", false, t0)
	h.send(SnapshotMsg{Source: 1, Err: errors.New("connection refused")})
	if hidden() {
		t.Errorf("the View after a failed answer was not built again")
	}
}

// A refresh lays the table's rows out once: Update's settle chooses the
// shape, and View draws that layout rather than measuring the rows again;
// so does a key that moves the cursor. The frame is the one a layout made
// afresh would draw.
func TestRefreshLaysRowsOutOnce(t *testing.T) {
	h := newHarness(t, Options{Interval: time.Second})
	h.start(160, 50)
	_ = h.m.View()
	for _, msg := range []tea.Msg{SnapshotMsg{Snapshot: sample()}, press("down"), tea.WindowSizeMsg{Width: 150, Height: 40}} {
		before := h.m.table.layouts
		h.send(msg)
		got := h.m.View().Content
		if n := h.m.table.layouts - before; n != 1 {
			t.Errorf("after %T: %d layouts of the rows, want 1", msg, n)
		}
		h.m.table.laidOK = false
		if fresh := h.m.render(); fresh != got {
			t.Errorf("after %T the frame drawn differs from one laid out afresh:\n%s\nafresh:\n%s", msg, got, fresh)
		}
	}
}
