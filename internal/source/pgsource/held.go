package pgsource

import (
	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/model"
)

// holdKey is one backend's granted rows of one key.
type holdKey struct {
	key model.KeyID
	pid int32
}

// bound lowers held times to what the server proves, and keeps them
// within what it allows:
//
//   - A holder that blocks a waiter in a conflicting mode has held its lock
//     at least since that waiter began waiting: a request that conflicts
//     with a waiter queues behind it, so the holder was granted before the
//     wait began. (The exception is a holder that itself queued ahead of
//     the waiter and was granted after the wait began; blocked, when not
//     nil, says which blockers a waiter had when first seen, and a Monitor
//     that saw the holder still waiting then does not count it.)
//   - A lock other than advisory belongs to its transaction, so it is held
//     at most since the transaction began (Lock.XactStart): HeldSince is
//     never earlier. An advisory lock may be a session's, older than any
//     transaction, so the cap does not apply to it.
func bound(locks []model.Lock, blocked func(w *model.Lock, pid int32) bool) {
	// Only the holders a waiter names, on a waiter's entity id, can be
	// bounded: find those with int keys first, so that 10,000 holders and
	// a few waiters cost 10,000 int lookups, not 10,000 KeyIDs hashed.
	var pids map[int32]bool
	var ids map[int64]bool
	for i := range locks {
		if w := &locks[i]; !w.Granted && !w.WaitStart.IsZero() && len(w.BlockedBy) > 0 {
			if pids == nil {
				pids, ids = map[int32]bool{}, map[int64]bool{}
			}
			for _, pid := range w.BlockedBy {
				pids[pid] = true
			}
			ids[w.EntityID] = true
		}
	}
	var holds map[holdKey][]int
	var lastPID int32
	var lastNamed bool // whether a waiter names lastPID: one lookup per run of a backend's rows
	for i := range locks {
		l := &locks[i]
		if pids == nil || !l.Granted || l.PID == 0 {
			continue
		}
		if l.PID != lastPID {
			lastPID, lastNamed = l.PID, pids[l.PID]
		}
		if lastNamed && ids[l.EntityID] {
			if holds == nil {
				holds = map[holdKey][]int{}
			}
			k := holdKey{l.KeyID(), l.PID}
			holds[k] = append(holds[k], i)
		}
	}
	for i := range locks {
		w := &locks[i]
		if w.Granted || w.WaitStart.IsZero() {
			continue
		}
		for _, pid := range w.BlockedBy {
			if blocked != nil && !blocked(w, pid) {
				continue
			}
			for _, h := range holds[holdKey{w.KeyID(), pid}] {
				l := &locks[h]
				if !pglocks.ModesConflict(l.Mode, w.Mode) {
					continue
				}
				if l.HeldSince.IsZero() || w.WaitStart.Before(l.HeldSince) {
					l.HeldSince = w.WaitStart
				}
			}
		}
	}
	for i := range locks {
		l := &locks[i]
		if x := l.Session().XactStart; l.Granted && l.Kind != model.KindAdvisory && !x.IsZero() && !l.HeldSince.IsZero() && l.HeldSince.Before(x) {
			l.HeldSince = x
		}
	}
}
