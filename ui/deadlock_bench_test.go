package ui

import (
	"strconv"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// mixedSnapshot is n locks of every kind in queues of four (a holder and
// three waiters): advisory keys whose backends carry owner ids, Redis keys
// and leases held and awaited by owners, one source each; and ten cycles
// across kinds among them, as the graph must find.
func mixedSnapshot(n int) model.Snapshot {
	s := model.Snapshot{Taken: t0, Connections: 300, Interval: time.Second,
		Sources: []model.SourceStatus{{Name: "postgres", Taken: t0}, {Name: "redis", Taken: t0}, {Name: "lease", Taken: t0}}}
	owner := func(i int) string { return "pod-" + strconv.Itoa(i%500) + ":" + strconv.Itoa(i) }
	for i := 0; i < n; i++ {
		q, pos := i/4, i%4
		hold := q * 4
		switch q % 3 {
		case 0: // advisory
			pid := int32(10000 + i)
			l := lock("AGENT", int64(q), pid, model.AppWithOwner("svc", owner(i)), pos == 0)
			l.Owner = owner(i)
			if pos == 0 {
				s.Locks = append(s.Locks, held(l, time.Second))
			} else {
				s.Locks = append(s.Locks, waiting(l, pos, time.Duration(pos)*time.Second, int32(10000+hold)))
			}
		default: // Redis, lease
			k, src := model.KindRedis, 1
			if q%3 == 2 {
				k, src = model.KindLease, 2
			}
			l := model.Lock{Kind: k, Name: "key:" + strconv.Itoa(q), Owner: owner(i), Mode: "exclusive", Source: src, Granted: pos == 0}
			if pos > 0 {
				l.WaitStart, l.QueuePos, l.BlockedByOwners = t0.Add(-time.Second), pos, []string{owner(hold)}
			}
			s.Locks = append(s.Locks, l)
		}
	}
	// Ten cycles: the holder of queue 3c (advisory) waits on queue 3c+1
	// (Redis), whose holder waits on queue 3c.
	for c := range 10 {
		a, r := 3*c*4, (3*c+1)*4
		s.Locks = append(s.Locks,
			model.Lock{Kind: model.KindRedis, Name: "key:" + strconv.Itoa(3*c+1), Owner: owner(a), Mode: "exclusive", Source: 1,
				WaitStart: t0.Add(-time.Second), QueuePos: 4, BlockedByOwners: []string{owner(r)}},
			waiting(func() model.Lock {
				l := lock("AGENT", int64(3*c), int32(20000+c), model.AppWithOwner("svc", owner(r)), false)
				l.Owner = owner(r)
				return l
			}(), 4, time.Second, int32(10000+a)))
	}
	return s
}

// BenchmarkDeadlocks10k sets the wait-for graph's cost beside the refresh
// it belongs to, at 10,000 locks of mixed kinds: "graph" builds the graph,
// finds its cycles and feeds the detector (all a refresh spends on the
// graph: the table, the forest, the detector and the metrics share the one
// graph of a snapshot, waitfor.For); "refresh" is the whole update and
// render of that snapshot, graph included; "refresh-no-episodes" the same
// without the event log's episode tracker, for the graph's share of the
// rest; "build" the graph alone (graph − build is what finding the cycles
// adds).
func BenchmarkDeadlocks10k(b *testing.B) {
	snaps := []model.Snapshot{mixedSnapshot(10000), mixedSnapshot(10000)}
	if cs := waitfor.Build(&snaps[0]).Cycles(); len(cs) != 10 {
		b.Fatalf("%d cycles in the benchmark's snapshot, want 10", len(cs))
	}
	// Each refresh is another poll (waitfor.For shares a graph only within
	// one): the same rows, read a moment later.
	poll := func(i int) model.Snapshot {
		s := snaps[i%2]
		s.Taken = t0.Add(time.Duration(i) * time.Microsecond)
		return s
	}
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			_ = waitfor.Build(&snaps[i%2])
		}
	})
	b.Run("graph", func(b *testing.B) {
		var d waitfor.Detector
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			d.Observe(waitfor.Build(&snaps[i%2]))
		}
		if len(d.Active()) != 10 {
			b.Fatalf("%d deadlocks, want 10", len(d.Active()))
		}
	})
	b.Run("refresh", func(b *testing.B) {
		h := newHarness(b, Options{})
		h.send(tea.WindowSizeMsg{Width: 160, Height: 50})
		h.send(SnapshotMsg{Snapshot: snaps[1]})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			h.m.Update(SnapshotMsg{Snapshot: poll(i)})
			_ = h.m.View()
		}
		if len(h.m.deadlocks) != 10 {
			b.Fatalf("%d deadlocks on screen, want 10", len(h.m.deadlocks))
		}
	})
	b.Run("refresh-no-episodes", func(b *testing.B) {
		h := newHarness(b, Options{})
		h.m.episodes = nil
		h.send(tea.WindowSizeMsg{Width: 160, Height: 50})
		h.send(SnapshotMsg{Snapshot: snaps[1]})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			h.m.Update(SnapshotMsg{Snapshot: poll(i)})
			_ = h.m.View()
		}
		if len(h.m.deadlocks) != 10 {
			b.Fatalf("%d deadlocks on screen, want 10", len(h.m.deadlocks))
		}
	})
}
