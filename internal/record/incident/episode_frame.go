package incident

import (
	"slices"
	"strconv"

	"github.com/locktop/locktop/model"
)

// keyRef is a key the tracker has seen. The tracker's maps are keyed by
// the pointer, and a frame numbers each key once, so a KeyID (seven
// strings) is hashed once per key per snapshot instead of several times
// per row: at 10,000 locks that hashing was most of the tracker's time.
type keyRef struct {
	id   model.KeyID
	gen  uint64 // the frame that last numbered it
	n    int32  // its node in that frame's graph
	kept uint64 // the frame after which an open episode still named it
}

// waitRef is one wait: a waiter on a key since a moment.
type waitRef struct {
	key   *keyRef
	who   session
	start int64
}

// holdRef is one hold: a holder of a key since a moment.
type holdRef struct {
	key   *keyRef
	who   session
	since int64
}

// sessKey is a session as a frame numbers it: a backend's pid, else an
// owner (what Lock.Holder names, without formatting the pid).
type sessKey struct {
	pid   int32
	owner string
}

// frame is one snapshot's wait graph: its keys and sessions numbered as
// nodes and joined by every waiting row (a union-find over the numbers).
type frame struct {
	key    []*keyRef // per row: its key (nil: left out)
	who    []int32   // per row: its session's node (-1: left out)
	bFrom  []int32   // per row: where its blockers start in bNodes
	bNodes []int32   // the waiting rows' blockers, as nodes
	parent []int32   // per node
	names  []session // per node: the session's name ("" for a key)
	grants [][]int32 // per node: the rows the session holds
	// held[heldFrom[n]:heldFrom[n+1]] are the granted rows of key node n
	// (empty for a session): a waiter's blocker's grant on the key is
	// found among the key's few grants, not the blocker's many.
	heldFrom []int32
	held     []int32
	waits    []bool // per node: the session waits in this frame
	// scanned is, per node, 1 + the component whose rows have had that
	// blocker's grants scanned (0: none): a mark per node instead of a
	// map per component.
	scanned []int32
	pids    map[int32]int32  // a backend's node, by pid
	owners  map[string]int32 // an owner's node
}

// frameOf numbers s's keys and sessions and joins them. Unless full, a
// granted row of a key no one waits for is left out (its key nil): only
// the holds need it, and at 10,000 held locks with a few waiters it is
// nearly every row.
func (x *Episodes) frameOf(s *model.Snapshot, full bool) *frame {
	x.gen++
	n := len(s.Locks)
	f := &frame{key: make([]*keyRef, n), who: make([]int32, n), bFrom: make([]int32, n+1)}
	// The keys waited for, or some more with the same hint; their entity
	// ids first, an int's lookup, which rules out most granted rows before
	// a hint (two strings) is hashed.
	var waited map[model.KeyHint]bool
	var waitedIDs map[int64]bool
	rows := n // the rows the frame numbers, at most: its maps are sized once, not grown
	if !full {
		rows = 0
		for j := range s.Locks {
			if !s.Locks[j].Granted {
				rows++
			}
		}
		waited, waitedIDs = make(map[model.KeyHint]bool, rows), make(map[int64]bool, rows)
		var last *model.Lock
		for j := range s.Locks {
			l := &s.Locks[j]
			if l.Granted || last != nil && l.SameKey(last) {
				continue // the waiters of a key come together: its hint is hashed once
			}
			last = l
			waited[l.KeyHint()] = true
			waitedIDs[l.EntityID] = true
		}
		rows *= 2 // and their holders
	}
	f.pids, f.owners = make(map[int32]int32, rows), map[string]int32{}
	f.parent, f.names = make([]int32, 0, 2*rows), make([]session, 0, 2*rows)
	f.grants, f.waits = make([][]int32, 0, 2*rows), make([]bool, 0, 2*rows)
	var prev *keyRef
	var prevRow *model.Lock
	for j := range s.Locks {
		l := &s.Locks[j]
		f.bFrom[j] = int32(len(f.bNodes))
		if waited != nil && l.Granted && (!waitedIDs[l.EntityID] || !waited[l.KeyHint()]) {
			f.who[j] = -1
			continue
		}
		// Rows come grouped by key: most rows are their neighbour's key.
		if prevRow == nil || !l.SameKey(prevRow) {
			prevRow = l
			id := l.KeyID()
			prev = x.keys[id]
			if prev == nil {
				prev = &keyRef{id: id}
				x.keys[id] = prev
			}
			if prev.gen != x.gen {
				prev.gen, prev.n = x.gen, f.node("")
			}
		}
		f.key[j] = prev
		sk := sessKey{owner: l.Owner}
		if l.PID != 0 {
			sk = sessKey{pid: l.PID}
		}
		who := f.session(sk)
		f.who[j] = who
		if l.Granted {
			f.grants[who] = append(f.grants[who], int32(j))
			continue
		}
		f.waits[who] = true
		for _, p := range l.BlockedBy {
			f.bNodes = append(f.bNodes, f.session(sessKey{pid: p}))
		}
		for _, o := range l.BlockedByOwners {
			f.bNodes = append(f.bNodes, f.session(sessKey{owner: o}))
		}
	}
	f.bFrom[n] = int32(len(f.bNodes))
	f.scanned = make([]int32, len(f.parent))
	f.heldFrom = make([]int32, len(f.parent)+1)
	for j := range s.Locks {
		if s.Locks[j].Granted && f.key[j] != nil {
			f.heldFrom[f.key[j].n+1]++
		}
	}
	for i := 1; i < len(f.heldFrom); i++ {
		f.heldFrom[i] += f.heldFrom[i-1]
	}
	f.held = make([]int32, f.heldFrom[len(f.heldFrom)-1])
	fill := slices.Clone(f.heldFrom[:len(f.heldFrom)-1])
	for j := range s.Locks {
		if s.Locks[j].Granted && f.key[j] != nil {
			k := f.key[j].n
			f.held[fill[k]] = int32(j)
			fill[k]++
		}
	}
	for j := range s.Locks {
		if s.Locks[j].Granted {
			continue
		}
		k := f.key[j].n
		f.union(k, f.who[j])
		for _, b := range f.blockers(j) {
			f.union(k, b)
		}
	}
	return f
}

// node adds a node named name ("" for a key).
func (f *frame) node(name session) int32 {
	n := int32(len(f.parent))
	f.parent = append(f.parent, n)
	f.names = append(f.names, name)
	f.grants = append(f.grants, nil)
	f.waits = append(f.waits, false)
	return n
}

func (f *frame) session(k sessKey) int32 {
	if k.pid != 0 {
		n, ok := f.pids[k.pid]
		if !ok {
			n = f.node(session(strconv.Itoa(int(k.pid))))
			f.pids[k.pid] = n
		}
		return n
	}
	n, ok := f.owners[k.owner]
	if !ok {
		n = f.node(session(k.owner))
		f.owners[k.owner] = n
	}
	return n
}

// grantsOn are the granted rows of key node k.
func (f *frame) grantsOn(k int32) []int32 { return f.held[f.heldFrom[k]:f.heldFrom[k+1]] }

// blockers are the nodes of row j's blockers, as Lock.Blockers orders them.
func (f *frame) blockers(j int) []int32 { return f.bNodes[f.bFrom[j]:f.bFrom[j+1]] }

func (f *frame) find(n int32) int32 {
	for f.parent[n] != n {
		f.parent[n] = f.parent[f.parent[n]]
		n = f.parent[n]
	}
	return n
}

func (f *frame) union(a, b int32) {
	if ra, rb := f.find(a), f.find(b); ra != rb {
		f.parent[ra] = rb
	}
}
