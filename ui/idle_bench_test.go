package ui

import (
	"testing"

	tea "charm.land/bubbletea/v2"
)

// BenchmarkRestFrame is what the dashboard does at rest for each message
// (a tick, an unchanged snapshot): an Update and a full View, at 10 locks.
func BenchmarkRestFrame(b *testing.B) {
	h := newHarness(b, Options{})
	h.send(tea.WindowSizeMsg{Width: 160, Height: 50})
	snap := bigSnapshot(12)
	h.send(SnapshotMsg{Snapshot: snap})
	b.ReportAllocs()
	for b.Loop() {
		h.m.Update(SnapshotMsg{Snapshot: snap})
		_ = h.m.View()
	}
}
