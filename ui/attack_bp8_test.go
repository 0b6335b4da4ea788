package ui

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
)

// Attack test (bp8) on merge sharing the server's rows when the other
// source has none: the dashboard's merged table is then the server
// snapshot's own array. Whatever the screen does with it (sort, filter,
// details, the forest, a refresh that keeps it as the previous snapshot,
// a second server's refresh, rewind) must leave the snapshot as its
// source returned it.
func TestAttackSharedRowsNotWritten(t *testing.T) {
	snap := sample()
	before, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	empty := &fakeLockSource{name: "lease", results: []SnapshotMsg{{Snapshot: model.Snapshot{Taken: t0}}}}
	h := newHarness(t, Options{Source: &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: snap}}}, Sources: []source.Source{empty}})
	h.start(120, 36)
	if len(h.m.merged.Locks) == 0 || &h.m.merged.Locks[0] != &snap.Locks[0] {
		t.Fatal("the merged table does not share the server's rows: nothing to attack")
	}
	h.keys("o", "o", "o", "/", "A", "G", "E", "N", "T", "enter", "esc", "j", "enter", "esc", "w", "esc", "D", "esc", "b", "left", "right", "L")
	h.step(h.tick())
	h.step(tickMsg{source: 1, seq: h.m.poll.feeds[1].seq})
	h.keys("o", "j", "j", "enter", "esc")
	_ = h.view()
	after, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the server's snapshot was written through the shared merged rows:\nbefore %s\nafter  %s", before, after)
	}
}
