package pgsource

import (
	"cmp"
	"slices"
	"strings"

	"github.com/locktop/locktop/internal/source/pglocks"

	"github.com/locktop/locktop/model"
)

// objKey is a pg_locks object as the rows name it.
type objKey struct {
	lockType, database string
	relation           uint32
	tuple, object      string
}

// groupKey is the part of a group's model.KeyID that others sets: half
// the strings of a KeyID to hash.
type groupKey struct {
	kind        model.Kind
	database    string
	relation    uint32
	row, object string
}

func objOf(r *pglocks.Other) objKey {
	return objKey{r.LockType, r.Database, r.RelationOID, r.Tuple, r.Object}
}

// heavyGroup is the waiters of one locked object and the holders that
// block them.
type heavyGroup struct {
	id       model.KeyID
	relation string // the relation's name, "" when not known
	// members are the group's rows, as indices into Table.Others: its
	// waiters in the server's order, then its holders; extra the blockers
	// with no row on the object, who get a holder row with no mode. The
	// model rows are written once, into the snapshot's array, when every
	// group is known: a row is 560 bytes, and a slice of them per group
	// grew and was copied again into the snapshot.
	members []int32
	extra   []int32
	holds   []int32 // pids of the holders among members
	// The first members, extra blocker and holder live here, so that a
	// group of a row wait (a waiter, its blocker) allocates no slice: the
	// groups' array never grows once a group is made (see others).
	inline [4]int32
}

// newGroup appends a group for id to groups, which has room for it.
func newGroup(groups []heavyGroup, id model.KeyID, relation string) []heavyGroup {
	groups = append(groups, heavyGroup{id: id, relation: relation})
	g := &groups[len(groups)-1]
	g.members, g.extra, g.holds = g.inline[0:0:2], g.inline[2:2:3], g.inline[3:3:4]
	return groups
}

// others appends the heavyweight rows of other lock types to out as model locks,
// one group per locked object: its holders, then its waiters in queue
// order. A transaction id wait whose waiter holds a tuple lock is a wait
// for that row, and joins the row's group with the tuple lock's waiters
// (the waiter holding the tuple lock is next; the others queue behind it),
// so a `SELECT … FOR UPDATE` queue reads as one row's queue. A waiter's
// BlockedBy is lockcore's pg_blocking_pids()-like set narrowed to the
// group's holders, so earlier waiters do not stand as blockers (the
// staircase the design avoids for advisory locks) unless no holder
// conflicts; a row's waiters are blocked by the transaction that holds
// the row. A blocker without a row of its own on the object gets a holder
// row with no mode. The rows are written into out's room past its length,
// which must be zero (as make leaves it).
func others(t *pglocks.Table, out []model.Lock, sessions *backends) []model.Lock {
	if len(t.Others) == 0 {
		return out
	}
	// The row a transaction id waiter waits for: the tuple lock it holds.
	// Everything is sized by the waiters, so nothing grows and is copied.
	waiters := 0
	for i := range t.Others {
		if !t.Others[i].Granted {
			waiters++
		}
	}
	rowOf := make(map[int32]*pglocks.Other, waiters)
	waitsXID := make(map[int32]bool, waiters)
	for i := range t.Others {
		switch r := &t.Others[i]; {
		case r.LockType == "tuple" && r.Granted:
			rowOf[r.PID] = r
		case r.LockType == "transactionid" && !r.Granted:
			waitsXID[r.PID] = true
		}
	}

	// One group per waiter at most: the array never grows, so the slices
	// into each group's inline room stay valid.
	groups := make([]heavyGroup, 0, waiters)
	byID := make(map[groupKey]int32, waiters)
	byObj := make(map[objKey]int32, waiters) // the objects waited for
	// Waiters first: they define the groups.
	for i := range t.Others {
		r := &t.Others[i]
		if r.Granted {
			continue
		}
		id := model.KeyID{Database: r.Database, RelationOID: r.RelationOID}
		rel := r.Relation
		switch r.LockType {
		case "tuple":
			id.Kind, id.Row = model.KindRow, r.Tuple
		case "transactionid":
			if tr := rowOf[r.PID]; tr != nil {
				id = model.KeyID{Kind: model.KindRow, Database: tr.Database, RelationOID: tr.RelationOID, Row: tr.Tuple}
				rel = tr.Relation
			} else {
				id.Kind, id.Object = model.KindTransaction, r.Object
			}
		case "relation":
			id.Kind = model.KindRelation
		default:
			id.Kind, id.Object = model.KindOther, r.Object
		}
		gk := groupKey{id.Kind, id.Database, id.RelationOID, id.Row, id.Object}
		g, ok := byID[gk]
		if !ok {
			g = int32(len(groups))
			byID[gk] = g
			groups = newGroup(groups, id, rel)
		}
		byObj[objOf(r)] = g
		groups[g].members = append(groups[g].members, int32(i))
	}
	// Then the granted rows on what they wait for.
	for i := range t.Others {
		r := &t.Others[i]
		if !r.Granted {
			continue
		}
		gi, ok := byObj[objOf(r)]
		if !ok {
			continue // a lock nobody waits for
		}
		g := &groups[gi]
		if g.has(t, r.PID) {
			continue // a waiter's own tuple lock
		}
		if r.LockType == "tuple" && waitsXID[r.PID] {
			continue // the head of a row's queue: a waiter, not a holder
		}
		g.members = append(g.members, int32(i))
		g.holds = append(g.holds, r.PID)
	}

	// Each waiter's blockers, narrowed to its group's holders.
	blockedBy := make(map[*pglocks.Other][]int32, waiters)
	for gi := range groups {
		g := &groups[gi]
		var holders []int32
		for _, m := range g.members {
			r := &t.Others[m]
			if r.Granted {
				continue
			}
			var narrowed []int32
			for _, p := range r.BlockedBy {
				if slices.Contains(g.holds, p) {
					narrowed = append(narrowed, p)
				}
			}
			switch {
			case len(narrowed) > 0:
			case g.id.Kind == model.KindRow && len(g.holds) > 0:
				if holders == nil {
					holders = slices.Sorted(slices.Values(g.holds))
				}
				narrowed = append(narrowed, holders...)
			default:
				narrowed = append(narrowed, r.BlockedBy...)
				for _, p := range r.BlockedBy {
					if !g.has(t, p) && !slices.Contains(g.extra, p) {
						g.extra = append(g.extra, p)
					}
				}
			}
			blockedBy[r] = narrowed
		}
	}

	// The comparisons one after another, not cmp.Or's arguments: those are
	// all evaluated, four string compares per pair of groups, and a poll
	// with 100 row waits sorts 100 groups. Indices are sorted, not the
	// groups: moving a group moves its strings under the GC's write barrier.
	order := make([]int32, len(groups))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(i, j int32) int {
		a, b := &groups[i], &groups[j]
		if a.id.Kind != b.id.Kind {
			if c := cmp.Compare(kindRank(a.id.Kind), kindRank(b.id.Kind)); c != 0 {
				return c
			}
		}
		if c := strings.Compare(a.id.Database, b.id.Database); c != 0 {
			return c
		}
		if c := strings.Compare(a.relation, b.relation); c != 0 {
			return c
		}
		if a.id.RelationOID != b.id.RelationOID {
			return cmp.Compare(a.id.RelationOID, b.id.RelationOID)
		}
		if c := strings.Compare(a.id.Row, b.id.Row); c != 0 {
			return c
		}
		return strings.Compare(a.id.Object, b.id.Object)
	})

	// Each group's rows in queue order (holders first, then waiters by wait
	// start, then by pid), sorted as pointers and written once into out.
	// The blockers with no row get theirs from one array, made to size.
	var ents []*pglocks.Other
	var extras []pglocks.Other
	if n := extraRows(groups); n > 0 {
		extras = make([]pglocks.Other, 0, n)
	}
	for _, gi := range order {
		g := &groups[gi]
		ents = ents[:0]
		for _, m := range g.members {
			ents = append(ents, &t.Others[m])
		}
		for _, pid := range g.extra {
			b := t.Backends[pid]
			if b == nil {
				b = &pglocks.Backend{}
			}
			extras = append(extras, pglocks.Other{PID: pid, Granted: true, Backend: b, LockType: t.Others[g.members[0]].LockType})
			ents = append(ents, &extras[len(extras)-1])
		}
		slices.SortFunc(ents, func(a, b *pglocks.Other) int {
			return cmp.Or(
				model.CompareBool(!a.Granted, !b.Granted),
				a.WaitStart.Compare(b.WaitStart),
				cmp.Compare(a.PID, b.PID),
			)
		})
		// out's room past its length is zero (build made it so): the rows
		// are filled in place, field by field (see build).
		out = slices.Grow(out, len(ents))
		pos := 0
		for _, r := range ents {
			out = out[:len(out)+1]
			l := &out[len(out)-1]
			fill(l, r, g, sessions)
			if !r.Granted {
				pos++
				l.QueuePos = pos
				l.BlockedBy = blockedBy[r]
			}
		}
	}
	return out
}

// extraRows counts the groups' blockers that have no row of their own.
func extraRows(groups []heavyGroup) int {
	n := 0
	for i := range groups {
		n += len(groups[i].extra)
	}
	return n
}

// has reports whether a row of g is pid's.
func (g *heavyGroup) has(t *pglocks.Table, pid int32) bool {
	for _, m := range g.members {
		if t.Others[m].PID == pid {
			return true
		}
	}
	return false
}

// fill writes r, a row of group g, into l, a zero model lock.
func fill(l *model.Lock, r *pglocks.Other, g *heavyGroup, sessions *backends) {
	id := &g.id
	b := r.Backend
	mb, owner := sessions.of(b)
	l.Kind, l.PID, l.Database, l.Backend, l.Owner = id.Kind, r.PID, id.Database, mb, owner
	l.Mode, l.Granted, l.LockType = r.Mode, r.Granted, r.LockType
	l.Relation, l.RelationOID, l.Row, l.Object = g.relation, id.RelationOID, id.Row, id.Object
	if !r.Granted {
		l.WaitStart = r.WaitStart
	} else if idle(b.State) && !b.StateChange.IsZero() {
		l.HeldSince = b.StateChange
	}
}

// kindRank orders kinds as model.Kinds lists them.
func kindRank(k model.Kind) int {
	if i := slices.Index(model.Kinds, k); i >= 0 {
		return i
	}
	return len(model.Kinds)
}
