package pgsource

import (
	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/model"
)

// bound lowers held times to what the server proves, and keeps them
// within what it allows:
//
//   - A holder that blocks a waiter in a conflicting mode has held its lock
//     at least since that waiter began waiting: a request that conflicts
//     with a waiter queues behind it, so the holder was granted before the
//     wait began. (The exception is a holder that itself queued ahead of
//     the waiter and was granted after the wait began; blocked, when not
//     nil, says whether pid blocked the waiter locks[w] when it was first
//     seen, and a Monitor that saw the holder still waiting then does not
//     count it.)
//   - A lock other than advisory belongs to its transaction, so it is held
//     at most since the transaction began (Lock.XactStart): HeldSince is
//     never earlier. An advisory lock may be a session's, older than any
//     transaction, so the cap does not apply to it.
//
// locks must come grouped by key, the rows of one key next to one
// another, as buildWith writes them.
func bound(locks []model.Lock, blocked func(w int, pid int32) bool) {
	// A waiter's holders are in its run of rows, so no row is looked up
	// by its KeyID (issue 26: hashing a KeyID per holder named by a
	// waiter, and the map that held them, were most of bound at 100 row
	// waits).
	var byPID map[int32][]int // a large run's holders, by pid
	for i := 0; i < len(locks); {
		j, waits := i+1, !locks[i].Granted
		for j < len(locks) && locks[j].SameKey(&locks[i]) {
			waits = waits || !locks[j].Granted
			j++
		}
		if waits {
			boundRun(locks, i, j, blocked, &byPID)
		}
		i = j
	}
	for i := range locks {
		l := &locks[i]
		if x := l.Session().XactStart; l.Granted && l.Kind != model.KindAdvisory && !x.IsZero() && !l.HeldSince.IsZero() && l.HeldSince.Before(x) {
			l.HeldSince = x
		}
	}
}

// runScan is the most holders of a run that bound scans for a blocker's
// rows; a run with more looks them up by pid.
const runScan = 16

// boundRun is bound's first rule for the run locks[from:to], the rows of
// one key.
func boundRun(locks []model.Lock, from, to int, blocked func(w int, pid int32) bool, byPID *map[int32][]int) {
	holders := 0
	for i := from; i < to; i++ {
		if locks[i].Granted && locks[i].PID != 0 {
			holders++
		}
	}
	if holders == 0 {
		return
	}
	large := holders > runScan
	if large {
		if *byPID == nil {
			*byPID = map[int32][]int{}
		}
		clear(*byPID)
		for i := from; i < to; i++ {
			if l := &locks[i]; l.Granted && l.PID != 0 {
				(*byPID)[l.PID] = append((*byPID)[l.PID], i)
			}
		}
	}
	lower := func(h int, w *model.Lock) {
		if l := &locks[h]; pglocks.ModesConflict(l.Mode, w.Mode) && (l.HeldSince.IsZero() || w.WaitStart.Before(l.HeldSince)) {
			l.HeldSince = w.WaitStart
		}
	}
	for wi := from; wi < to; wi++ {
		w := &locks[wi]
		if w.Granted || w.WaitStart.IsZero() {
			continue
		}
		for _, pid := range w.BlockedBy {
			if pid == 0 || blocked != nil && !blocked(wi, pid) {
				continue
			}
			if large {
				for _, h := range (*byPID)[pid] {
					lower(h, w)
				}
				continue
			}
			for h := from; h < to; h++ {
				if locks[h].Granted && locks[h].PID == pid {
					lower(h, w)
				}
			}
		}
	}
}
