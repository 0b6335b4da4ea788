package waitfor

import (
	"sync"

	"github.com/locktop/locktop/model"
)

// shared keeps the graphs of the last few snapshots, so that the table, the
// forest, the deadlock detector and the metrics of one refresh build one
// graph between them.
var shared struct {
	mu     sync.Mutex
	graphs [4]*Graph
	next   int
}

// For is the graph of s: the one built for the same snapshot before, while
// it is among the last few, else a new one (Build). The same snapshot
// means the same rows (the same array of Locks, copied or not) read at
// the same time; so s's rows must not change once a graph is made of them,
// as every holder of a snapshot already assumes.
func For(s *model.Snapshot) *Graph {
	if len(s.Locks) == 0 {
		return Build(s)
	}
	shared.mu.Lock()
	for _, g := range shared.graphs {
		if g != nil && same(&g.snap, s) {
			shared.mu.Unlock()
			return g
		}
	}
	shared.mu.Unlock()
	g := Build(s) // outside the lock: two builders at once each build
	shared.mu.Lock()
	shared.graphs[shared.next] = g
	shared.next = (shared.next + 1) % len(shared.graphs)
	shared.mu.Unlock()
	return g
}

// same reports whether a and b are one snapshot: the same rows, read at the
// same time.
func same(a, b *model.Snapshot) bool {
	return len(a.Locks) == len(b.Locks) && &a.Locks[0] == &b.Locks[0] && a.Taken.Equal(b.Taken) &&
		a.Latency == b.Latency && len(a.Sources) == len(b.Sources)
}
