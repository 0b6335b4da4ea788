package ui

import (
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
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

// restBeside is the load of benchreport's "at rest beside pg_activity":
// one session holding 1,000 advisory keys, 20 sessions each waiting for one
// of them; the snapshot of refresh i is taken i seconds later, so that the
// TIME column ages as on screen.
func restBeside(i int) model.Snapshot {
	s := model.Snapshot{Taken: t0.Add(time.Duration(i) * time.Second), Connections: 25, Interval: time.Second, Latency: 6 * time.Millisecond}
	s.Locks = make([]model.Lock, 0, 1020)
	for k := int64(1); k <= 1000; k++ {
		s.Locks = append(s.Locks, held(lock("80", k, 4000, "psql", true), time.Minute))
		if k <= 20 {
			s.Locks = append(s.Locks, waiting(lock("80", k, 5000+int32(k), "", false), 1, 50*time.Second, 4000))
		}
	}
	return s
}

// BenchmarkRestBeside is one refresh of the dashboard at rest beside
// pg_activity (see restBeside): the poll's answer through Update and the
// View drawn after it, at 160×50.
func BenchmarkRestBeside(b *testing.B) {
	h := newHarness(b, Options{})
	h.send(tea.WindowSizeMsg{Width: 160, Height: 50})
	snaps := make([]model.Snapshot, 64)
	for i := range snaps {
		snaps[i] = restBeside(i)
	}
	h.send(SnapshotMsg{Snapshot: snaps[0]})
	_ = h.m.View()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		h.m.Update(SnapshotMsg{Snapshot: snaps[i%len(snaps)]})
		_ = h.m.View()
	}
}
