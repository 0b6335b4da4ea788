package pgsource

import (
	"slices"
	"time"

	"github.com/locktop/locktop/model"
)

// grantID identifies one backend's hold, or one wait, of one key in one
// mode. A wait includes its start, so a backend that waits again counts as
// a new wait. What identifies the key and the mode is interned (see
// interner): a poll of 10,000 locks hashes 10,000 keys of three numbers,
// not nine strings for each.
type grantID struct {
	pid   int32
	names uint32 // the row's kind, database, key names and mode, interned
	key   int64  // model.Lock.EntityID
	wait  int64  // a wait's start (UnixNano); 0 for a grant
}

// names are the strings of a row's identity that the number of the key
// (EntityID) leaves out, and its mode.
type names struct {
	kind                        model.Kind
	database, namespace, mode   string
	pair                        bool
	relation, row, object, name string
	relationOID                 uint32 // when set, relation is "" (as in model.KeyID)
}

// maxNames bounds the interner: past it (and past twice what it kept the
// last time), track renumbers what it still remembers, so a server that
// cycles through many namespaces over days does not grow it for ever.
const maxNames = 4096

// interner numbers names, from 1. Rows come grouped by database and key, so
// an advisory row's names are mostly the previous row's, and checking that
// is a few compares of the same strings.
type interner struct {
	ids    map[names]uint32
	byID   []names // byID[id-1] are the names numbered id
	last   names
	lastID uint32
	kept   int // how many names the last renumbering kept
}

func (n *interner) id(l *model.Lock) uint32 {
	k := names{l.Kind, l.Database, l.Namespace, l.Mode, l.Pair, l.Relation, l.Row, l.Object, l.Name, l.RelationOID}
	if l.RelationOID != 0 {
		k.relation = "" // the oid identifies it, so a name that comes later changes nothing
	}
	if n.lastID != 0 && k == n.last {
		return n.lastID
	}
	id, ok := n.ids[k]
	if !ok {
		if n.ids == nil {
			n.ids = map[names]uint32{}
		}
		n.byID = append(n.byID, k)
		id = uint32(len(n.byID))
		n.ids[k] = id
	}
	n.last, n.lastID = k, id
	return id
}

// grantOf and waitOf identify a granted and a waiting row across polls.
func (m *Monitor) grantOf(l *model.Lock) grantID {
	return grantID{pid: l.PID, names: m.keyNames.id(l), key: l.EntityID}
}

func (m *Monitor) waitOf(l *model.Lock) grantID {
	id := grantID{pid: l.PID, names: m.keyNames.id(l), key: l.EntityID}
	if !l.WaitStart.IsZero() {
		id.wait = l.WaitStart.UnixNano()
	}
	return id
}

// waitBlockers are a waiting row's blockers when it was first seen.
type waitBlockers struct {
	row      int // the row's index in the snapshot's locks
	blockers []int32
}

// grantSeen is what a Monitor remembers of a grant: when it first saw it.
type grantSeen struct {
	id    grantID
	first time.Time
}

// track works out held times and counts new waits. A holder's HeldSince is
// the earliest time the lock is known to have been held since: when this
// monitor first saw the grant, unless the backend has started a statement
// since (it may have released and taken the lock again, so counting starts
// anew), or Inspect's bounds (see bound), whichever is earlier; a waiter
// bounds only the holders that blocked it when this monitor first saw it
// wait. Held times are never more than the truth.
func (m *Monitor) track(snap *model.Snapshot) {
	if n := len(m.keyNames.byID); n > maxNames && n > 2*m.keyNames.kept {
		m.renumber()
	}
	waits := make(map[grantID][]int32, len(m.seenWaits))
	// Each waiter's blockers when first seen, by its row: bound asks for
	// them by row, so a waiter's identity is interned and hashed once.
	firstBlocked := m.firstBlocked[:0]
	for i := range snap.Locks {
		l := &snap.Locks[i]
		if l.Granted {
			continue
		}
		id := m.waitOf(l)
		first, ok := m.seenWaits[id]
		if !ok {
			first = slices.Clone(l.BlockedBy)
			if !m.lastTaken.IsZero() {
				snap.NewWaits++
			}
		}
		waits[id] = first
		firstBlocked = append(firstBlocked, waitBlockers{i, first})
	}
	bound(snap.Locks, func(w int, pid int32) bool {
		j, ok := slices.BinarySearchFunc(firstBlocked, w, func(b waitBlockers, w int) int { return b.row - w })
		return ok && slices.Contains(firstBlocked[j].blockers, pid)
	})
	m.firstBlocked = firstBlocked[:0]
	// The grants a poll shows are mostly the last poll's, in the same order
	// (the Reader keeps the server's order): walk the two lists side by
	// side, and look a grant up by its identity only when the walk loses
	// step (issue 26: a map lookup per grant, and a pass to delete the
	// released ones, were two thirds of track at 10,000 locks). A grant not
	// shown again is left behind: released since.
	prev, next := m.grants, m.spareGrants[:0]
	var index map[grantID]int // prev's grants by identity, built on the first miss
	k := 0
	for i := range snap.Locks {
		l := &snap.Locks[i]
		if !l.Granted {
			continue
		}
		id, first, seen := m.grantOf(l), snap.Taken, false
		if k < len(prev) && prev[k].id == id {
			first, seen = prev[k].first, true
			k++
		} else {
			if index == nil {
				index = make(map[grantID]int, len(prev))
				for j := range prev {
					index[prev[j].id] = j
				}
			}
			if j, ok := index[id]; ok {
				first, seen, k = prev[j].first, true, j+1
			}
		}
		if seen && l.Session().QueryStart.After(first) {
			first = snap.Taken
		}
		next = append(next, grantSeen{id: id, first: first})
		if l.HeldSince.IsZero() || first.Before(l.HeldSince) {
			l.HeldSince = first
		}
	}
	m.grants, m.spareGrants = next, prev[:0]
	if !m.lastTaken.IsZero() {
		snap.Interval = snap.Taken.Sub(m.lastTaken)
	}
	m.seenWaits, m.lastTaken = waits, snap.Taken
}

// renumber interns afresh only the names that the remembered grants and
// waits use, and rewrites their keys to match.
func (m *Monitor) renumber() {
	old := m.keyNames
	m.keyNames = interner{}
	re := func(id grantID) grantID {
		n := old.byID[id.names-1]
		id.names = m.keyNames.id(&model.Lock{Kind: n.kind, Database: n.database, Namespace: n.namespace, Mode: n.mode,
			Pair: n.pair, Relation: n.relation, RelationOID: n.relationOID, Row: n.row, Object: n.object, Name: n.name})
		return id
	}
	for i := range m.grants {
		m.grants[i].id = re(m.grants[i].id)
	}
	waits := make(map[grantID][]int32, len(m.seenWaits))
	for id, b := range m.seenWaits {
		waits[re(id)] = b
	}
	m.seenWaits = waits
	m.keyNames.kept = len(m.keyNames.byID)
}
