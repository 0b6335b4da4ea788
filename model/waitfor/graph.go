package waitfor

import (
	"cmp"
	"slices"
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

// canon is x's node: a backend that is its owner's one backend is the
// owner.
func (g *Graph) canon(x Session) Session {
	if x.PID != 0 {
		return g.backend(x.Source, x.PID)
	}
	return x
}

// backend is the session of the holder pid of source src names: the
// owner its rows carry, else the backend.
func (g *Graph) backend(src int, pid int32) Session {
	if o, ok := g.owners[pidKey{src, pid}]; ok {
		return Session{Owner: o}
	}
	return Session{Source: src, PID: pid}
}

// pidKey is a backend of a source.
type pidKey struct {
	src int
	pid int32
}

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
// snapshot; it is read-only afterwards. Sessions are numbered in the order
// of first appearance; the edges and rows are kept by number, so a graph of
// 10,000 locks costs a few map lookups per row, not per edge walked.
type Graph struct {
	snap     *model.Snapshot
	ids      map[Session]int32
	order    []Session // every session, by number
	blockers [][]int32 // waiter → the holders it waits for
	waiters  [][]int32 // holder → its direct waiters
	waits    [][]int   // a session's waiting rows
	holds    [][]int   // a session's granted rows
	waited   []time.Duration
	roots    []Root
	rootIdx  []int32           // a session's place in roots, -1 for none
	owners   map[pidKey]string // a backend's owner id, from its rows
	cycles   []Cycle           // found on first use (Cycles)
	cycled   bool
}

// Build builds the graph of s. s must not change while the graph is used.
func Build(s *model.Snapshot) *Graph {
	n := len(s.Locks)
	g := &Graph{snap: s, ids: make(map[Session]int32, n), owners: map[pidKey]string{},
		order: make([]Session, 0, n), blockers: make([][]int32, 0, n), waiters: make([][]int32, 0, n),
		waits: make([][]int, 0, n), holds: make([][]int, 0, n), waited: make([]time.Duration, 0, n)}
	// A waiter names its holders by pid: the owner a holder's rows carry
	// makes it the same node as that owner's Redis and lease locks, unless
	// the owner has several backends here (which of them is the party
	// holding its Redis and lease locks is unknown).
	backends := map[string]pidKey{}
	several := map[string]bool{}
	for i := range s.Locks {
		if l := &s.Locks[i]; l.PID != 0 && l.Owner != "" {
			k := pidKey{l.Source, l.PID}
			if b, ok := backends[l.Owner]; ok && b != k {
				several[l.Owner] = true
			}
			backends[l.Owner] = k
		}
	}
	for o, k := range backends {
		if !several[o] {
			g.owners[k] = o
		}
	}
	for i := range s.Locks {
		l := &s.Locks[i]
		me := g.id(g.canon(Of(l)))
		if l.Granted {
			g.holds[me] = append(g.holds[me], i)
			continue
		}
		g.waits[me] = append(g.waits[me], i)
		g.waited[me] = max(g.waited[me], l.Waited(s.Now(l)))
		add := func(b int32) {
			if b == me || slices.Contains(g.blockers[me], b) {
				return
			}
			g.blockers[me] = append(g.blockers[me], b)
			g.waiters[b] = append(g.waiters[b], me)
		}
		for _, p := range l.BlockedBy {
			add(g.id(g.backend(l.Source, p)))
		}
		for _, o := range l.BlockedByOwners {
			add(g.id(Session{Owner: o}))
		}
	}
	g.rootIdx = make([]int32, len(g.order))
	for x := range g.order {
		g.rootIdx[x] = -1
		if len(g.blockers[x]) == 0 && len(g.waiters[x]) > 0 {
			g.roots = append(g.roots, Root{Session: g.order[x], Cost: g.cost(int32(x))})
		}
	}
	slices.SortStableFunc(g.roots, func(a, b Root) int {
		return cmp.Or(cmp.Compare(b.Behind, a.Behind), cmp.Compare(b.Waited, a.Waited))
	})
	for i, r := range g.roots {
		g.rootIdx[g.ids[r.Session]] = int32(i)
	}
	return g
}

// id numbers x, on first sight.
func (g *Graph) id(x Session) int32 {
	if n, ok := g.ids[x]; ok {
		return n
	}
	n := int32(len(g.order))
	g.ids[x] = n
	g.order = append(g.order, x)
	g.blockers = append(g.blockers, nil)
	g.waiters = append(g.waiters, nil)
	g.waits = append(g.waits, nil)
	g.holds = append(g.holds, nil)
	g.waited = append(g.waited, 0)
	return n
}

// lookup is x's number, -1 for a session not in the graph.
func (g *Graph) lookup(x Session) int32 {
	if n, ok := g.ids[g.canon(x)]; ok {
		return n
	}
	return -1
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

// cost walks the waiters behind x.
func (g *Graph) cost(x int32) Cost {
	c := Cost{Direct: len(g.waiters[x])}
	seen := map[int32]bool{x: true}
	stack := slices.Clone(g.waiters[x])
	for len(stack) > 0 {
		w := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[w] {
			continue
		}
		seen[w] = true
		c.Behind++
		c.Waited += g.waited[w]
		stack = append(stack, g.waiters[w]...)
	}
	return c
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
		b := g.blockers[n]
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
		return g.sessions(g.blockers[n])
	}
	return nil
}

// Waiters are the sessions that wait for x directly.
func (g *Graph) Waiters(x Session) []Session {
	if n := g.lookup(x); n >= 0 {
		return g.sessions(g.waiters[n])
	}
	return nil
}

// Waits are the rows (indexes into the snapshot's Locks) x waits on.
func (g *Graph) Waits(x Session) []int {
	if n := g.lookup(x); n >= 0 {
		return g.waits[n]
	}
	return nil
}

// Holds are the rows x holds.
func (g *Graph) Holds(x Session) []int {
	if n := g.lookup(x); n >= 0 {
		return g.holds[n]
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
		if len(g.blockers[x]) == 0 {
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
		if len(g.blockers[y]) == 0 {
			return true
		}
		stack = append(stack, g.blockers[y]...)
	}
	return false
}
