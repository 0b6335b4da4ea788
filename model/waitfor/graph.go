package waitfor

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/locktop/locktop/model"
)

// Session is one party of the graph, a node: an owner id (a Redis or lease
// owner; Source and PID are then zero), or a PostgreSQL backend of one
// source (Source, PID). A backend whose rows carry an owner id is that
// owner's node, so the same party in PostgreSQL, Redis and a lease table is
// one node, but only while the owner has that one backend in the snapshot:
// the lock family stamps one id per process, and two backends of one
// process (a pool) wait for each other as any two sessions do.
type Session struct {
	Source int
	PID    int32
	Owner  string // when set, Source and PID are zero
}

// Of is the session of a lock row: its backend for a PostgreSQL row, else
// its owner. The graph's methods map a backend to its owner's node where
// the two are one (see Session).
func Of(l *model.Lock) Session {
	if l.PID != 0 {
		return Session{Source: l.Source, PID: l.PID}
	}
	return Session{Owner: l.Owner}
}

// pidKey is a backend of a source, as one map key.
func pidKey(src int, pid int32) uint64 { return uint64(uint32(src))<<32 | uint64(uint32(pid)) }

// Cost is what a root blocker costs: the sessions waiting behind it,
// directly and in all (through others), and the time those have waited,
// summed (each session's longest current wait, counted once).
type Cost struct {
	Direct, Behind int
	Waited         time.Duration
}

// Root is a root blocker and its cost.
type Root struct {
	Session Session
	Cost
}

// Graph is the wait-for graph of one snapshot. Build it once per
// snapshot (For shares it between the table, the forest, the detector and
// the metrics); it is read-only afterwards and safe for concurrent use.
// Sessions are numbered in the order of first appearance; edges and rows
// are kept by number in flat arrays (a session's part at off[x]:off[x+1]),
// so a graph of 10,000 locks costs a few map lookups per row and a handful
// of allocations in all.
type Graph struct {
	snap    model.Snapshot // a copy of the header: the caller's variable may be reused
	byPID   map[uint64]int32
	byOwner map[string]int32
	order   []Session // every session, by number
	// blockers: waiter → the holders it waits for, in the order its rows
	// name them; waiters: holder → its direct waiters, in row order.
	blkOff, blk []int32
	wtrOff, wtr []int32
	// A session's waiting and granted rows (indexes into Locks).
	waitOff, holdOff   []int32
	waitRows, holdRows []int
	waited             []time.Duration
	roots              []Root
	rootIdx            []int32           // a session's place in roots, -1 for none
	joined             map[uint64]string // a backend's owner id, where it is that owner's one backend
	once               sync.Once
	cycles             []Cycle // found on first use (Cycles)
}

// Build builds the graph of s. s's locks must not change while the graph
// is used.
func Build(s *model.Snapshot) *Graph {
	n := len(s.Locks)
	// A waiter names its holders by pid: the owner a holder's rows carry
	// makes it the same node as that owner's Redis and lease locks, unless
	// the owner has several backends here (which of them is the party
	// holding its Redis and lease locks is unknown).
	const several = ^uint64(0)
	backends := map[string]uint64{}
	// runs counts the rows that start a run of one session's rows: the
	// sessions are rarely more (a blocker named by a waiter without a row of
	// its own), so they are sized by it, not by the rows (10,000 locks of
	// one session: 0.7 MB a refresh less, issue 26).
	runs := 0
	for i := range s.Locks {
		l := &s.Locks[i]
		if i == 0 || l.PID != s.Locks[i-1].PID || l.Source != s.Locks[i-1].Source || l.Owner != s.Locks[i-1].Owner {
			runs++
		}
		if l.PID != 0 && l.Owner != "" {
			k := pidKey(l.Source, l.PID)
			if b, ok := backends[l.Owner]; ok && b != k {
				k = several
			}
			backends[l.Owner] = k
		}
	}
	g := &Graph{snap: *s, byPID: make(map[uint64]int32, runs), byOwner: map[string]int32{},
		order: make([]Session, 0, runs), waited: make([]time.Duration, 0, runs)}
	g.joined = make(map[uint64]string, len(backends))
	for o, k := range backends {
		if k != several {
			g.joined[k] = o
		}
	}
	// The edges in the order they are first seen; a waiter's are chained
	// (head, next) to refuse a repeat.
	type edge struct{ from, to int32 }
	var edges []edge
	var head, next []int32
	rowNode := make([]int32, n)
	var prev *model.Lock
	var me int32
	for i := range s.Locks {
		l := &s.Locks[i]
		// A session's rows often come one after another (a holder of many
		// keys): its node is its neighbour's, without a map lookup.
		if prev == nil || l.PID != prev.PID || l.Source != prev.Source || l.Owner != prev.Owner {
			me = g.rowNode(l)
		}
		prev = l
		rowNode[i] = me
		if l.Granted {
			continue
		}
		g.waited[me] = max(g.waited[me], l.Waited(s.Now(l)))
		add := func(b int32) {
			if b == me {
				return
			}
			for len(head) < len(g.order) {
				head = append(head, -1)
			}
			for e := head[me]; e >= 0; e = next[e] {
				if edges[e].to == b {
					return
				}
			}
			edges = append(edges, edge{me, b})
			next = append(next, head[me])
			head[me] = int32(len(edges) - 1)
		}
		for _, p := range l.BlockedBy {
			add(g.pidNode(pidKey(l.Source, p)))
		}
		for _, o := range l.BlockedByOwners {
			add(g.ownerNode(o))
		}
	}
	m := len(g.order)
	// Counting sorts, stable: each session's part keeps the first-seen order.
	g.blkOff, g.blk = make([]int32, m+1), make([]int32, len(edges))
	g.wtrOff, g.wtr = make([]int32, m+1), make([]int32, len(edges))
	for _, e := range edges {
		g.blkOff[e.from+1]++
		g.wtrOff[e.to+1]++
	}
	g.waitOff, g.holdOff = make([]int32, m+1), make([]int32, m+1)
	for i, x := range rowNode {
		if s.Locks[i].Granted {
			g.holdOff[x+1]++
		} else {
			g.waitOff[x+1]++
		}
	}
	for x := range m {
		g.blkOff[x+1] += g.blkOff[x]
		g.wtrOff[x+1] += g.wtrOff[x]
		g.waitOff[x+1] += g.waitOff[x]
		g.holdOff[x+1] += g.holdOff[x]
	}
	fill := make([]int32, m)
	put := func(off []int32, x int32) int32 { // the next free place in x's part
		p := off[x] + fill[x]
		fill[x]++
		return p
	}
	for _, e := range edges {
		g.blk[put(g.blkOff, e.from)] = e.to
	}
	clear(fill)
	for _, e := range edges {
		g.wtr[put(g.wtrOff, e.to)] = e.from
	}
	clear(fill)
	g.waitRows, g.holdRows = make([]int, g.waitOff[m]), make([]int, g.holdOff[m])
	fillH := make([]int32, m)
	for i, x := range rowNode {
		if s.Locks[i].Granted {
			g.holdRows[g.holdOff[x]+fillH[x]] = i
			fillH[x]++
		} else {
			g.waitRows[put(g.waitOff, x)] = i
		}
	}
	g.rootIdx = make([]int32, m)
	var rs []int32
	for x := range int32(m) {
		g.rootIdx[x] = -1
		if len(g.blockersOf(x)) == 0 && len(g.waitersOf(x)) > 0 {
			rs = append(rs, x)
		}
	}
	// Costliest first; ties in order of first appearance.
	costs := g.costs(rs)
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(costs[b].Behind, costs[a].Behind), cmp.Compare(costs[b].Waited, costs[a].Waited), cmp.Compare(a, b))
	})
	g.roots = make([]Root, len(rs))
	for i, j := range idx {
		g.roots[i] = Root{Session: g.order[rs[j]], Cost: costs[j]}
		g.rootIdx[rs[j]] = int32(i)
	}
	return g
}

// rowNode numbers the session of row l: its backend (its owner's node
// where it is that owner's one backend), else its owner.
func (g *Graph) rowNode(l *model.Lock) int32 {
	if l.PID != 0 {
		return g.pidNode(pidKey(l.Source, l.PID))
	}
	return g.ownerNode(l.Owner)
}

// pidNode numbers backend k, on first sight.
func (g *Graph) pidNode(k uint64) int32 {
	if n, ok := g.byPID[k]; ok {
		return n
	}
	var n int32
	if o, ok := g.joined[k]; ok {
		n = g.ownerNode(o)
	} else {
		n = g.add(Session{Source: int(int32(k >> 32)), PID: int32(uint32(k))})
	}
	g.byPID[k] = n
	return n
}

// ownerNode numbers owner o, on first sight.
func (g *Graph) ownerNode(o string) int32 {
	if n, ok := g.byOwner[o]; ok {
		return n
	}
	n := g.add(Session{Owner: o})
	g.byOwner[o] = n
	return n
}

func (g *Graph) add(x Session) int32 {
	g.order = append(g.order, x)
	g.waited = append(g.waited, 0)
	return int32(len(g.order) - 1)
}

// blockersOf, waitersOf, waitsOf and holdsOf are session x's parts.
func (g *Graph) blockersOf(x int32) []int32 { return g.blk[g.blkOff[x]:g.blkOff[x+1]] }
func (g *Graph) waitersOf(x int32) []int32  { return g.wtr[g.wtrOff[x]:g.wtrOff[x+1]] }
func (g *Graph) waitsOf(x int32) []int      { return g.waitRows[g.waitOff[x]:g.waitOff[x+1]:g.waitOff[x+1]] }
func (g *Graph) holdsOf(x int32) []int      { return g.holdRows[g.holdOff[x]:g.holdOff[x+1]:g.holdOff[x+1]] }

// lookup is x's number, -1 for a session not in the graph (a backend
// that is its owner's one backend is the owner's node).
func (g *Graph) lookup(x Session) int32 {
	var n int32
	var ok bool
	if x.PID != 0 {
		n, ok = g.byPID[pidKey(x.Source, x.PID)]
	} else {
		n, ok = g.byOwner[x.Owner]
	}
	if !ok {
		return -1
	}
	return n
}

// sessions turns numbers into sessions.
func (g *Graph) sessions(ns []int32) []Session {
	if len(ns) == 0 {
		return nil
	}
	out := make([]Session, len(ns))
	for i, n := range ns {
		out[i] = g.order[n]
	}
	return out
}

// costs walks the waiters behind each root, with one mark per session
// (the root's turn) rather than a set per root.
func (g *Graph) costs(roots []int32) []Cost {
	out := make([]Cost, len(roots))
	mark := make([]int32, len(g.order))
	var stack []int32
	for i, x := range roots {
		turn := int32(i + 1)
		c := Cost{Direct: len(g.waitersOf(x))}
		mark[x] = turn
		stack = append(stack[:0], g.waitersOf(x)...)
		for len(stack) > 0 {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if mark[w] == turn {
				continue
			}
			mark[w] = turn
			c.Behind++
			c.Waited += g.waited[w]
			stack = append(stack, g.waitersOf(w)...)
		}
		out[i] = c
	}
	return out
}

// Roots are the root blockers, costliest first (most sessions behind,
// then the longest waited in all).
func (g *Graph) Roots() []Root { return g.roots }

// Root reports whether x is a root blocker, and its cost.
func (g *Graph) Root(x Session) (Root, bool) {
	n := g.lookup(x)
	if n < 0 || g.rootIdx[n] < 0 {
		return Root{}, false
	}
	return g.roots[g.rootIdx[n]], true
}

// Rank is x's root's place in Roots (0 the costliest) and x's distance
// from it (0 for the root itself), following the first blocker of each
// wait. ok is false for a session that neither blocks nor waits, or whose
// waits lead to no root (a cycle).
func (g *Graph) Rank(x Session) (rank, depth int, ok bool) {
	n := g.lookup(x)
	if n < 0 {
		return 0, 0, false
	}
	for steps := 0; steps <= len(g.order); steps++ {
		if i := g.rootIdx[n]; i >= 0 {
			return int(i), depth, true
		}
		b := g.blockersOf(n)
		if len(b) == 0 {
			return 0, 0, false
		}
		n = b[0]
		depth++
	}
	return 0, 0, false // round a cycle
}

// Blockers are the sessions x waits for.
func (g *Graph) Blockers(x Session) []Session {
	if n := g.lookup(x); n >= 0 {
		return g.sessions(g.blockersOf(n))
	}
	return nil
}

// Waiters are the sessions that wait for x directly.
func (g *Graph) Waiters(x Session) []Session {
	if n := g.lookup(x); n >= 0 {
		return g.sessions(g.waitersOf(n))
	}
	return nil
}

// Waits are the rows (indexes into the snapshot's Locks) x waits on.
func (g *Graph) Waits(x Session) []int {
	if n := g.lookup(x); n >= 0 {
		return g.waitsOf(n)
	}
	return nil
}

// Holds are the rows x holds.
func (g *Graph) Holds(x Session) []int {
	if n := g.lookup(x); n >= 0 {
		return g.holdsOf(n)
	}
	return nil
}

// Waited is how long x has waited (its longest current wait).
func (g *Graph) Waited(x Session) time.Duration {
	if n := g.lookup(x); n >= 0 {
		return g.waited[n]
	}
	return 0
}

// Stranded are the sessions that wait but lead to no root blocker: each
// is in, or waits behind, a cycle of waits (a deadlock the server has
// not broken yet, or one across kinds no server sees).
func (g *Graph) Stranded() []Session {
	var out []Session
	for x := range g.order {
		if len(g.blockersOf(int32(x))) == 0 {
			continue
		}
		if !g.reachesRoot(int32(x)) {
			out = append(out, g.order[x])
		}
	}
	return out
}

// reachesRoot reports whether any chain of blockers from x ends at a root.
func (g *Graph) reachesRoot(x int32) bool {
	seen := map[int32]bool{}
	stack := []int32{x}
	for len(stack) > 0 {
		y := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[y] {
			continue
		}
		seen[y] = true
		if len(g.blockersOf(y)) == 0 {
			return true
		}
		stack = append(stack, g.blockersOf(y)...)
	}
	return false
}
