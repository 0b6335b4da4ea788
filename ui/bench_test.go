package ui

import (
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// bigSnapshot is n locks in queues of four: a holder and three waiters.
func bigSnapshot(n int) model.Snapshot {
	s := model.Snapshot{Taken: t0, Connections: 300, Interval: time.Second, NewWaits: n / 10}
	for i := 0; i < n; i++ {
		key, pos := int64(i/4), i%4
		pid := int32(10000 + i)
		if pos == 0 {
			s.Locks = append(s.Locks, held(lock("AGENT", key, pid, "locktop.lock", true), time.Duration(i)*time.Millisecond))
			continue
		}
		s.Locks = append(s.Locks, waiting(lock("AGENT", key, pid, "hook.prompt", false), pos, time.Duration(pos)*time.Second, pid-int32(pos)))
	}
	return s
}

// BenchmarkSnapshot10k is one refresh at 10,000 locks: the snapshot's
// message through Update (grouping, filtering, sorting, the event diff) and
// a full render. The budget for poll + decode + render is 50 ms.
func BenchmarkSnapshot10k(b *testing.B) {
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"plain", nil},
		{"sorted-filtered", []string{"o", "/", "h", "o", "o", "k", "enter"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			snaps := []model.Snapshot{bigSnapshot(10000), bigSnapshot(10000)}
			h := newHarness(b, Options{})
			h.send(tea.WindowSizeMsg{Width: 160, Height: 50})
			h.send(SnapshotMsg{Snapshot: snaps[1]})
			for _, k := range tc.keys {
				h.send(press(k))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				h.m.Update(SnapshotMsg{Snapshot: snaps[i%2]})
				_ = h.m.View()
			}
		})
	}
}

// BenchmarkIdleFrame is a redraw with nothing new (a key that changes
// nothing, a tick while paused): what the dashboard costs at rest.
func BenchmarkIdleFrame(b *testing.B) {
	h := newHarness(b, Options{})
	h.send(tea.WindowSizeMsg{Width: 160, Height: 50})
	h.send(SnapshotMsg{Snapshot: bigSnapshot(10000)})
	b.ReportAllocs()
	for b.Loop() {
		h.m.Update(tickMsg{seq: -1})
		_ = h.m.View()
	}
}
