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

func objOf(r *pglocks.Other) objKey {
	return objKey{r.LockType, r.Database, r.RelationOID, r.Tuple, r.Object}
}

// heavyGroup is the waiters of one locked object and the holders that
// block them.
type heavyGroup struct {
	id       model.KeyID
	relation string // the relation's name, "" when not known
	rows     []model.Lock
	// pids with a row in the group, and those holding it: slices, not
	// maps, since a group has a handful of rows and a poll many groups.
	pids, holds []int32
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
// row with no mode.
func others(t *pglocks.Table, out []model.Lock) []model.Lock {
	if len(t.Others) == 0 {
		return out
	}
	// The row a transaction id waiter waits for: the tuple lock it holds.
	rowOf := map[int32]*pglocks.Other{}
	for i := range t.Others {
		r := &t.Others[i]
		if r.LockType == "tuple" && r.Granted {
			rowOf[r.PID] = r
		}
	}
	waitsXID := map[int32]bool{}
	for i := range t.Others {
		if r := &t.Others[i]; r.LockType == "transactionid" && !r.Granted {
			waitsXID[r.PID] = true
		}
	}

	var groups []*heavyGroup
	byID := map[model.KeyID]*heavyGroup{}
	byObj := map[objKey]*heavyGroup{} // the objects waited for
	group := func(id model.KeyID, relation string) *heavyGroup {
		g := byID[id]
		if g == nil {
			g = &heavyGroup{id: id, relation: relation}
			byID[id] = g
			groups = append(groups, g)
		}
		return g
	}
	row := func(r *pglocks.Other, g *heavyGroup) model.Lock {
		id := g.id
		b := r.Backend
		l := model.Lock{
			Kind: id.Kind, PID: r.PID, Database: id.Database,
			User: b.User, ApplicationName: appOf(b.Application), ClientAddr: b.ClientAddr, State: b.State, Query: b.Query,
			QueryStart: b.QueryStart, StateChange: b.StateChange, XactStart: b.XactStart, Owner: ownerOf(b.Application),
			Mode: r.Mode, Granted: r.Granted, LockType: r.LockType,
			Relation: g.relation, RelationOID: id.RelationOID, Row: id.Row, Object: id.Object,
		}
		if !r.Granted {
			l.WaitStart = r.WaitStart
			l.BlockedBy = r.BlockedBy
		} else if idle(b.State) && !b.StateChange.IsZero() {
			l.HeldSince = b.StateChange
		}
		return l
	}

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
		g := group(id, rel)
		byObj[objOf(r)] = g
		g.rows = append(g.rows, row(r, g))
		g.pids = append(g.pids, r.PID)
	}
	// Then the granted rows on what they wait for.
	for i := range t.Others {
		r := &t.Others[i]
		if !r.Granted {
			continue
		}
		g := byObj[objOf(r)]
		if g == nil || slices.Contains(g.pids, r.PID) {
			continue // a waiter's own tuple lock, or a lock nobody waits for
		}
		if r.LockType == "tuple" && waitsXID[r.PID] {
			continue // the head of a row's queue: a waiter, not a holder
		}
		g.rows = append(g.rows, row(r, g))
		g.pids = append(g.pids, r.PID)
		g.holds = append(g.holds, r.PID)
	}

	for _, g := range groups {
		holders := slices.Sorted(slices.Values(g.holds))
		var extra []int32
		for i := range g.rows {
			l := &g.rows[i]
			if l.Granted {
				continue
			}
			var narrowed []int32
			for _, p := range l.BlockedBy {
				if slices.Contains(g.holds, p) {
					narrowed = append(narrowed, p)
				}
			}
			switch {
			case len(narrowed) > 0:
			case g.id.Kind == model.KindRow && len(holders) > 0:
				narrowed = append(narrowed, holders...)
			default:
				narrowed = append(narrowed, l.BlockedBy...)
				for _, p := range l.BlockedBy {
					if !slices.Contains(g.pids, p) && !slices.Contains(extra, p) {
						extra = append(extra, p)
					}
				}
			}
			l.BlockedBy = narrowed
		}
		for _, pid := range extra {
			b := t.Backends[pid]
			if b == nil {
				b = &pglocks.Backend{}
			}
			r := pglocks.Other{PID: pid, Granted: true, Backend: b, LockType: g.rows[0].LockType}
			g.rows = append(g.rows, row(&r, g))
		}
		slices.SortFunc(g.rows, func(a, b model.Lock) int {
			return cmp.Or(
				model.CompareBool(!a.Granted, !b.Granted),
				a.WaitStart.Compare(b.WaitStart),
				cmp.Compare(a.PID, b.PID),
			)
		})
		pos := 0
		for i := range g.rows {
			if !g.rows[i].Granted {
				pos++
				g.rows[i].QueuePos = pos
			}
		}
	}
	// The comparisons one after another, not cmp.Or's arguments: those are
	// all evaluated, four string compares per pair of groups, and a poll
	// with 100 row waits sorts 100 groups.
	slices.SortStableFunc(groups, func(a, b *heavyGroup) int {
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
	for _, g := range groups {
		out = append(out, g.rows...)
	}
	return out
}

// kindRank orders kinds as model.Kinds lists them.
func kindRank(k model.Kind) int {
	if i := slices.Index(model.Kinds, k); i >= 0 {
		return i
	}
	return len(model.Kinds)
}
