package pglocks

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// blockersByMap is blockers as it was before it gathered the rows of each
// object into one array: a map of slices, one per object. blockers must
// name the same blockers, in the same order.
func blockersByMap(rows []Other, objs []object) {
	// Waiters by object, in queue order.
	byObj := map[object][]int{}
	nums := make([]int, len(rows))
	for i := range rows {
		nums[i] = modeNumber(rows[i].Mode)
		byObj[objs[i]] = append(byObj[objs[i]], i)
	}
	for _, idx := range byObj {
		slices.SortStableFunc(idx, func(a, b int) int {
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
			var by []int32
			if conflictTable[n]&modes != 0 {
				for _, j := range idx[:qi] {
					if h := &rows[j]; h.PID != w.PID && conflictTable[n]&(1<<nums[j]) != 0 && !slices.Contains(by, h.PID) {
						by = append(by, h.PID)
					}
				}
			}
			modes |= 1 << n
			if by == nil {
				by = []int32{}
			}
			w.BlockedBy = by
		}
	}
}

// blockers names, for random rows of a few objects (holders and waiters in
// every mode, some sharing a wait start, a session waiting where it
// holds), the blockers the map of slices named, each waiter's in order,
// and a waiter's blockers stay its own: appending to one waiter's
// BlockedBy does not change the next waiter's.
func TestBlockersMatchMapOfSlices(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rnd := rand.New(rand.NewPCG(26, 27))
	for trial := range 300 {
		var rows []Other
		var objs []object
		for range rnd.IntN(60) {
			o := object{lockType: []string{"relation", "transactionid", "tuple"}[rnd.IntN(3)], database: 5, relation: uint32(rnd.IntN(3))}
			if o.lockType == "tuple" {
				o.tuple = fmt.Sprintf("(0,%d)", rnd.IntN(2))
			}
			r := Other{LockType: o.lockType, PID: int32(100 + rnd.IntN(12)), Mode: lockModes[rnd.IntN(len(lockModes))], Granted: rnd.IntN(3) == 0}
			if !r.Granted {
				r.WaitStart = t0.Add(time.Duration(rnd.IntN(5)) * time.Second)
			}
			rows, objs = append(rows, r), append(objs, o)
		}
		want, got := slices.Clone(rows), slices.Clone(rows)
		blockersByMap(want, slices.Clone(objs))
		blockers(got, slices.Clone(objs))
		for i := range want {
			if !slices.Equal(got[i].BlockedBy, want[i].BlockedBy) || (got[i].BlockedBy == nil) != (want[i].BlockedBy == nil) {
				t.Fatalf("trial %d, row %d (%s %s, pid %d, granted %v): BlockedBy %v, want %v",
					trial, i, got[i].LockType, got[i].Mode, got[i].PID, got[i].Granted, got[i].BlockedBy, want[i].BlockedBy)
			}
		}
		for i := range got {
			if !got[i].Granted {
				before := make([][]int32, len(got))
				for j := range got {
					before[j] = slices.Clone(got[j].BlockedBy)
				}
				got[i].BlockedBy = append(got[i].BlockedBy, -1)
				for j := range got {
					if j != i && !slices.Equal(got[j].BlockedBy, before[j]) {
						t.Fatalf("trial %d: appending to row %d's BlockedBy changed row %d's", trial, i, j)
					}
				}
			}
		}
	}
}
