package lease

import (
	"cmp"
	"context"
	"fmt"

	"github.com/locktop/locktop/lockcore"
)

// heldIn calls fn for every lease lock ctx holds (the family's held set,
// lockcore.Held), newest first, until fn returns false.
func heldIn(ctx context.Context, fn func(*Lock) bool) {
	for e := lockcore.Held(ctx); e != nil; e = e.Next() {
		if l, ok := e.Hold.(*Lock); ok && e.Kind == lockcore.KindLease {
			if !fn(l) {
				return
			}
		}
	}
}

// checkOrder refuses r when ctx holds a live lock that sorts at or after r
// on m's tables (seed 004 §8.1's global order: level, then id, then the
// tables' name, where). The same resource again counts: a second grant of
// it could wait behind a writer that waits for the first. The order is
// global across Managers, as it was before a lock knew its tables: two
// processes that nest map:m1 of one database and map:m2 of another the
// opposite way round would deadlock, and neither's order graph could see
// it (bp13's TestAttackTwoProcessesTwoStoresOpposite). The same resource
// on two sets of tables is two locks, taken in the order of their names
// (stable across processes: the tables' id and schema, a file's resolved
// path).
func (m *Manager) checkOrder(ctx context.Context, r Resource) (err error) {
	where := m.st.where()
	heldIn(ctx, func(h *Lock) bool {
		if h.Err() != nil {
			return true
		}
		c := compare(h.res, r)
		if c == 0 {
			c = cmp.Compare(h.entry.Store, where)
		}
		switch {
		case c < 0:
		case h.res == r && h.entry.Store != where:
			err = fmt.Errorf("%w: %s of %s is held in this context, and the one of %s comes before it",
				ErrLockOrder, h.res, h.entry.Store, where)
		default:
			err = fmt.Errorf("%w: %s is held in this context", ErrLockOrder, h.res)
		}
		return err == nil
	})
	return err
}

// FenceOf returns the fence of r as held through m in ctx (a Lock's
// context or one derived from it), if ctx holds r in m's tables: the fence
// to write with to the storage those tables guard.
func (m *Manager) FenceOf(ctx context.Context, r Resource) (fence int64, ok bool) {
	return liveFence(m.LockOf(ctx, r))
}

// FenceOf returns the fence of r as held in ctx (a Lock's context or one
// derived from it), if ctx holds r. A context that holds r in two sets of
// tables (Managers on two databases, schemas or files) reports false
// rather than the wrong one's fence: use Manager.FenceOf. Locks the
// context carries that are released or lost hold nothing, and count for
// neither.
func FenceOf(ctx context.Context, r Resource) (fence int64, ok bool) {
	return liveFence(lockOf(ctx, r, true))
}

// liveFence is the fence of l while it is held.
func liveFence(l *Lock) (int64, bool) {
	if l == nil || l.Err() != nil {
		return 0, false
	}
	return l.Fence(), true
}

// LockOf returns the newest lock on r in m's tables that ctx holds (a
// With body's context, a Lock's), or nil. It may have been lost since:
// check Err.
func (m *Manager) LockOf(ctx context.Context, r Resource) *Lock {
	if e := lockcore.Find(ctx, lockcore.KindLease, m.st.where(), r.String()); e != nil {
		return e.Hold.(*Lock)
	}
	return nil
}

// LockOf returns the newest lock on r that ctx holds (a With body's
// context, a Lock's), or nil. It may have been lost since: check Err. A
// context that holds r in two sets of tables (Managers on two databases,
// schemas or files) gets nil rather than either: use Manager.LockOf.
func LockOf(ctx context.Context, r Resource) *Lock { return lockOf(ctx, r, false) }

// lockOf is LockOf, of the locks still held only if live.
func lockOf(ctx context.Context, r Resource, live bool) (l *Lock) {
	heldIn(ctx, func(h *Lock) bool {
		if h.res != r || (live && h.Err() != nil) {
			return true
		}
		if l != nil && l.entry.Store != h.entry.Store {
			l = nil
			return false
		}
		if l == nil {
			l = h
		}
		return true
	})
	return l
}
