package ui

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
)

// onServer is s with every lock of target name, as a Stack of several
// targets stamps them.
func onServer(s model.Snapshot, name string) model.Snapshot {
	s.Locks = append([]model.Lock(nil), s.Locks...)
	for i := range s.Locks {
		s.Locks[i].Server = name
	}
	return s
}

// Three targets in one pane: a SERVER column, a line that sums them up,
// c's banner alone when it fails while a and b go on; server:b shows b
// alone, and v steps through the servers; the details name the server.
func TestFleetOnePane(t *testing.T) {
	a := &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: onServer(sample(), "a")}}}
	b := &fakeLockSource{name: "b/postgres", results: []SnapshotMsg{{Snapshot: onServer(model.Snapshot{Taken: t0, Locks: []model.Lock{
		held(lock("AGENT", 4712, 5100, "pile.holder", true), 9*time.Second),
		waiting(lock("AGENT", 4712, 5101, "pile.waiter", false), 1, 4*time.Second, 5100),
	}}, "b")}}}
	c := &fakeLockSource{name: "c/postgres", results: []SnapshotMsg{{Snapshot: onServer(model.Snapshot{Taken: t0}, "c")},
		{Err: errors.New("cannot reach the server: dial unix /tmp/c/.s.PGSQL.5432: connect: no such file or directory")}}}
	h := newHarness(t, Options{Source: a, Sources: []source.Source{b, c}, Targets: []string{"a", "b", "c"}, Server: "3 servers: a, b, c"})
	h.start(120, 36)
	v := ansi.Strip(h.view())
	if !hasLine(v, "SERVER") || !hasLine(v, "b ", "AGENT 4712", "ROOT") || !hasLine(v, "a ", "AGENT 7") {
		t.Fatalf("no SERVER column naming each key's server:\n%s", v)
	}
	if !strings.Contains(v, "3 servers · 3 up · 6 waiting (a 5, b 1)") {
		t.Errorf("the targets' line:\n%s", v)
	}
	// c fails: its banner alone, a and b go on.
	h.step(tickMsg{source: 2, seq: h.m.poll.feeds[2].seq})
	golden(t, "screen_fleet_c_down_120x36", h.view())
	v = ansi.Strip(h.view())
	if !strings.Contains(v, "c/postgres: no connection · retry 1 in 1s") || strings.Count(v, "no connection") != 1 {
		t.Errorf("the banner is not c's alone:\n%s", v)
	}
	if !strings.Contains(v, "3 servers · 2 up · 1 down (c)") {
		t.Errorf("the targets' line with c down:\n%s", v)
	}
	// v: a alone, then b alone (its holder's details name it), then all.
	h.keys("v")
	h.keys("v")
	v = ansi.Strip(h.view())
	if !hasLine(v, "b ", "AGENT 4712") || hasLine(v, "AGENT 7") || !strings.Contains(v, `filter "server:b"`) {
		t.Errorf("v twice: b alone:\n%s", v)
	}
	h.keys("enter")
	if v = ansi.Strip(h.view()); !strings.Contains(v, "on server b") {
		t.Errorf("the details do not name the server:\n%s", v)
	}
	h.keys("esc", "v", "v")
	if v = ansi.Strip(h.view()); !hasLine(v, "AGENT 7") || !hasLine(v, "AGENT 4712") {
		t.Errorf("v past the last server: every server again:\n%s", v)
	}
}

// One target (no Options.Targets): no SERVER column, no targets' line,
// and v says why it does nothing.
func TestOneTargetHasNoServerColumn(t *testing.T) {
	h := newHarness(t, Options{})
	h.start(120, 36)
	v := ansi.Strip(h.view())
	if hasLine(v, "SERVER") || strings.Contains(v, "servers ·") {
		t.Errorf("one server shows the fleet's parts:\n%s", v)
	}
	h.keys("v")
	if v = ansi.Strip(h.view()); !strings.Contains(v, "one server") {
		t.Errorf("v with one server says nothing:\n%s", v)
	}
}

// The filter server:NAME keeps the locks of that target only, whole
// queues, ignoring case.
func TestFilterServer(t *testing.T) {
	l := lock("AGENT", 1, 1, "x", true)
	l.Server = "Orders"
	f := parseFilter("server:orders")
	if !f.match(&l) || parseFilter("server:order").match(&l) || parseFilter("server:billing").match(&l) {
		t.Errorf("server:NAME matches the target's name exactly, ignoring case")
	}
}

// Two targets with a lease of one name: the details of b's lease show
// b's audit trail only, not a's record of the same name.
func TestAuditMatchesTarget(t *testing.T) {
	lease := func(server, actor string) model.Snapshot {
		s := model.Snapshot{Taken: t0, Locks: []model.Lock{{Kind: model.KindLease, Name: "map:m1", Namespace: "MAP",
			Owner: "job:" + server, Fence: 5, Mode: "write", Granted: true, HeldSince: t0.Add(-time.Minute), Server: server}},
			Audit: []model.Audit{{Name: "map:m1", Actor: actor, Reason: "lease expired", VictimOwner: "job:old", At: t0.Add(-time.Minute), Server: server}}}
		return s
	}
	snap := model.Merge([]model.Part{{Name: "a/lease", Snapshot: lease("a", "taker-a")}, {Name: "b/lease", Snapshot: lease("b", "taker-b")}})
	st := DefaultStyles()
	v := ansi.Strip(describeLock(&st, &snap, &snap.Locks[1], "", nil, 100))
	if !strings.Contains(v, "taker-b") || strings.Contains(v, "taker-a") {
		t.Errorf("b's lease shows another target's audit, or not its own:\n%s", v)
	}
}
