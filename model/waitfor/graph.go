package waitfor

import (
	"cmp"
	"slices"
	"time"

	"github.com/locktop/locktop/model"
)

// Session is one party of the graph, a node: an owner id when the row
// carries one (the lock family stamps one per process on every kind, so the
// same owner in PostgreSQL, Redis and a lease table is one node, whatever
// the source: Source and PID are then zero), else a PostgreSQL backend of
// one source (Source, PID).
type Session struct {
	Source int
	PID    int32
	Owner  string // when set, Source and PID are zero
}

// Of is the session of a lock row: its owner when it carries one, else its
// backend.
func Of(l *model.Lock) Session {
	if l.Owner != "" {
		return Session{Owner: l.Owner}
	}
	return Session{Source: l.Source, PID: l.PID}
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
// snapshot; it is read-only afterwards.
type Graph struct {
	snap     *model.Snapshot
	blockers map[Session][]Session // waiter → the holders it waits for
	waiters  map[Session][]Session // holder → its direct waiters
	waits    map[Session][]int     // a session's waiting rows
	holds    map[Session][]int     // a session's granted rows
	waited   map[Session]time.Duration
	order    []Session // every session, in the order of first appearance
	roots    []Root
	rootIdx  map[Session]int
	owners   map[pidKey]string // a backend's owner id, from its rows
	cycles   []Cycle           // found on first use (Cycles)
	cycled   bool
}

// Build builds the graph of s. s must not change while the graph is used.
func Build(s *model.Snapshot) *Graph {
	g := &Graph{snap: s, blockers: map[Session][]Session{}, waiters: map[Session][]Session{},
		waits: map[Session][]int{}, holds: map[Session][]int{}, waited: map[Session]time.Duration{}, rootIdx: map[Session]int{},
		owners: map[pidKey]string{}}
	// A waiter names its holders by pid: the owner a holder's rows carry
	// makes it the same node as that owner's Redis and lease locks.
	for i := range s.Locks {
		if l := &s.Locks[i]; l.PID != 0 && l.Owner != "" {
			g.owners[pidKey{l.Source, l.PID}] = l.Owner
		}
	}
	seen := map[Session]bool{}
	note := func(x Session) {
		if !seen[x] {
			seen[x] = true
			g.order = append(g.order, x)
		}
	}
	for i := range s.Locks {
		l := &s.Locks[i]
		me := Of(l)
		note(me)
		if l.Granted {
			g.holds[me] = append(g.holds[me], i)
			continue
		}
		g.waits[me] = append(g.waits[me], i)
		g.waited[me] = max(g.waited[me], l.Waited(s.Now(l)))
		add := func(b Session) {
			if b == me || slices.Contains(g.blockers[me], b) {
				return
			}
			note(b)
			g.blockers[me] = append(g.blockers[me], b)
			g.waiters[b] = append(g.waiters[b], me)
		}
		for _, p := range l.BlockedBy {
			add(g.backend(l.Source, p))
		}
		for _, o := range l.BlockedByOwners {
			add(Session{Owner: o})
		}
	}
	for _, x := range g.order {
		if len(g.blockers[x]) == 0 && len(g.waiters[x]) > 0 {
			g.roots = append(g.roots, Root{Session: x, Cost: g.cost(x)})
		}
	}
	slices.SortStableFunc(g.roots, func(a, b Root) int {
		return cmp.Or(cmp.Compare(b.Behind, a.Behind), cmp.Compare(b.Waited, a.Waited))
	})
	for i, r := range g.roots {
		g.rootIdx[r.Session] = i
	}
	return g
}

// cost walks the waiters behind x.
func (g *Graph) cost(x Session) Cost {
	c := Cost{Direct: len(g.waiters[x])}
	seen := map[Session]bool{x: true}
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
	i, ok := g.rootIdx[x]
	if !ok {
		return Root{}, false
	}
	return g.roots[i], true
}

// Rank is x's root's place in Roots (0 the costliest) and x's distance
// from it (0 for the root itself), following the first blocker of each
// wait. ok is false for a session that neither blocks nor waits, or whose
// waits lead to no root (a cycle).
func (g *Graph) Rank(x Session) (rank, depth int, ok bool) {
	seen := map[Session]bool{}
	for !seen[x] {
		seen[x] = true
		if i, isRoot := g.rootIdx[x]; isRoot {
			return i, depth, true
		}
		b := g.blockers[x]
		if len(b) == 0 {
			return 0, 0, false
		}
		x = b[0]
		depth++
	}
	return 0, 0, false
}

// Blockers are the sessions x waits for.
func (g *Graph) Blockers(x Session) []Session { return g.blockers[x] }

// Waiters are the sessions that wait for x directly.
func (g *Graph) Waiters(x Session) []Session { return g.waiters[x] }

// Waits are the rows (indexes into the snapshot's Locks) x waits on.
func (g *Graph) Waits(x Session) []int { return g.waits[x] }

// Holds are the rows x holds.
func (g *Graph) Holds(x Session) []int { return g.holds[x] }

// Waited is how long x has waited (its longest current wait).
func (g *Graph) Waited(x Session) time.Duration { return g.waited[x] }

// Stranded are the sessions that wait but lead to no root blocker: each
// is in, or waits behind, a cycle of waits (a deadlock the server has
// not broken yet, or one across kinds no server sees).
func (g *Graph) Stranded() []Session {
	var out []Session
	for _, x := range g.order {
		if len(g.blockers[x]) == 0 {
			continue
		}
		if !g.reachesRoot(x) {
			out = append(out, x)
		}
	}
	return out
}

// reachesRoot reports whether any chain of blockers from x ends at a root.
func (g *Graph) reachesRoot(x Session) bool {
	seen := map[Session]bool{}
	stack := []Session{x}
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
