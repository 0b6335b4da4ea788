package pglocks

import (
	"cmp"
	"slices"

	"github.com/locktop/locktop/model"
)

// object identifies what a pg_locks row of a type other than advisory
// locks: its locktag, as Read reads it.
type object struct {
	lockType           string
	database, relation uint32
	tuple, object      string
}

// lockModes are PostgreSQL's heavyweight lock modes, weakest first, as
// pg_locks spells them; a mode's number is its index + 1, as in
// src/include/storage/lockdefs.h.
var lockModes = [...]string{
	"AccessShareLock", "RowShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock",
	"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock",
}

// conflictTable is PostgreSQL's lock conflict table (LockConflicts in
// src/backend/storage/lmgr/lock.c, the table in the manual's "Explicit
// Locking"): bit m of conflictTable[n] is set when mode n conflicts with
// mode m. Every lock type in pg_locks uses it. Mode 0 stands for a name
// this table does not know and conflicts with everything, so a row is never
// shown as unblocked by a mode the table does not know.
var conflictTable = [...]uint16{
	0x1ff,
	1 | 1<<8,                             // AccessShare
	1 | 1<<7 | 1<<8,                      // RowShare
	1 | 1<<5 | 1<<6 | 1<<7 | 1<<8,        // RowExclusive
	1 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8, // ShareUpdateExclusive
	1 | 1<<3 | 1<<4 | 1<<6 | 1<<7 | 1<<8, // Share
	1 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8,               // ShareRowExclusive
	1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8,        // Exclusive
	1 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8, // AccessExclusive
}

// modeNumber is a mode's number, 0 for a name PostgreSQL does not use.
func modeNumber(mode string) int {
	return slices.Index(lockModes[:], mode) + 1
}

// ModesConflict reports whether a heavyweight lock held in mode held
// blocks a request for mode want, by PostgreSQL's conflict table; modes are
// spelled as pg_locks spells them ("AccessShareLock", "ExclusiveLock", …).
// A mode the table does not know (or "") conflicts with everything.
func ModesConflict(held, want string) bool {
	return conflictTable[modeNumber(want)]&(1<<modeNumber(held)) != 0
}

// blockers fills in each waiter's BlockedBy the way pg_blocking_pids()
// does (GetBlockerStatusData in lock.c), from the rows alone: the holders
// of the same object in a mode that conflicts with the waited-for mode
// (hard blockers), then the waiters queued ahead on the same object that
// want a conflicting mode (soft blockers: the lock manager queues a
// request behind them). It costs the server nothing, where
// pg_blocking_pids() takes every lock partition once per waiter.
//
// Where it can differ from pg_blocking_pids(): the wait queue's order is
// taken to be the order of waitstart (the server may queue a request that
// already holds a conflicting lock ahead of earlier waiters); a parallel
// query's workers are named by their own pids, not their leader's; and
// fast-path rows, which never block anyone, are not read.
func blockers(rows []Other, objs []object) {
	// The rows of each object are gathered into one array, in the rows'
	// order (a counting sort by object), and every waiter's BlockedBy is
	// cut from one array too: no slice per object or per waiter (issue 26:
	// at 100 row waits, a map of slices per object and a slice per waiter
	// were most of blockers).
	n := len(rows)
	ids := make(map[object]int32, n)
	ints := make([]int32, 3*n+1) // the rows' objects, the rows by object, where each object's rows begin
	group, order, start := ints[:n], ints[n:2*n], ints[2*n:]
	for i := range rows {
		g, ok := ids[objs[i]]
		if !ok {
			g = int32(len(ids))
			ids[objs[i]] = g
		}
		group[i] = g
		start[g+1]++
	}
	objects := len(ids)
	for g := range objects {
		start[g+1] += start[g]
	}
	for i := range rows {
		g := group[i]
		order[start[g]] = int32(i)
		start[g]++
	}
	// start[g] is now where object g's rows end, and start[g-1] where they
	// begin.
	nums := make([]int, n)
	for i := range rows {
		nums[i] = modeNumber(rows[i].Mode)
	}
	var by []int32 // every waiter's blockers, one after another
	from := int32(0)
	for g := range objects {
		idx := order[from:start[g]]
		from = start[g]
		slices.SortStableFunc(idx, func(a, b int32) int {
			ra, rb := &rows[a], &rows[b]
			return cmp.Or(
				model.CompareBool(!ra.Granted, !rb.Granted),
				ra.WaitStart.Compare(rb.WaitStart),
				cmp.Compare(ra.PID, rb.PID),
			)
		})
		// modes has a bit for every mode held or wanted so far, so a
		// waiter that conflicts with none of them (a queue of ShareLock
		// waiters on one transaction id) skips the scan of the queue.
		var modes uint16
		for qi, i := range idx {
			w := &rows[i]
			n := nums[i]
			if w.Granted {
				modes |= 1 << n
				continue
			}
			first := len(by)
			if conflictTable[n]&modes != 0 {
				for _, j := range idx[:qi] {
					if h := &rows[j]; h.PID != w.PID && conflictTable[n]&(1<<nums[j]) != 0 && !slices.Contains(by[first:], h.PID) {
						by = append(by, h.PID)
					}
				}
			}
			modes |= 1 << n
			// Capped, so that the next waiter's appends do not write
			// into this one's blockers.
			w.BlockedBy = by[first:len(by):len(by)]
			if len(w.BlockedBy) == 0 {
				w.BlockedBy = []int32{}
			}
		}
	}
}

// waitedFor keeps the rows of other lock types that matter to a waiter,
// in place: the waiters, the granted rows on the objects they wait for,
// and the tuple locks held by transaction id waiters (they name the row a
// `SELECT … FOR UPDATE` waits for).
func waitedFor(rows []Other, objs []object) ([]Other, []object) {
	waited := map[object]bool{}
	xidWaiters := map[int32]bool{}
	for i := range rows {
		if !rows[i].Granted {
			waited[objs[i]] = true
			if rows[i].LockType == "transactionid" {
				xidWaiters[rows[i].PID] = true
			}
		}
	}
	n := 0
	for i := range rows {
		r := &rows[i]
		if !r.Granted || waited[objs[i]] || (r.LockType == "tuple" && xidWaiters[r.PID]) {
			rows[n], objs[n] = *r, objs[i]
			n++
		}
	}
	return rows[:n], objs[:n]
}
