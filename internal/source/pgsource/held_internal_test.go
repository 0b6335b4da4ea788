package pgsource

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/model"
)

// boundByKey is bound's first rule as it was before bound walked runs of
// one key: every holder a waiter names, looked up by its KeyID. bound must
// give the same held times on rows grouped by key.
func boundByKey(locks []model.Lock, blocked func(w int, pid int32) bool) {
	type holdKey struct {
		key model.KeyID
		pid int32
	}
	holds := map[holdKey][]int{}
	for i := range locks {
		if l := &locks[i]; l.Granted && l.PID != 0 {
			k := holdKey{l.KeyID(), l.PID}
			holds[k] = append(holds[k], i)
		}
	}
	for wi := range locks {
		w := &locks[wi]
		if w.Granted || w.WaitStart.IsZero() {
			continue
		}
		for _, pid := range w.BlockedBy {
			if blocked != nil && !blocked(wi, pid) {
				continue
			}
			for _, h := range holds[holdKey{w.KeyID(), pid}] {
				if l := &locks[h]; pglocks.ModesConflict(l.Mode, w.Mode) && (l.HeldSince.IsZero() || w.WaitStart.Before(l.HeldSince)) {
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

// bound walks the rows of one key as one run: on rows grouped by key, as
// buildWith writes them, it lowers the same held times as looking every
// named holder up by its KeyID did, for small runs (holders scanned) and
// large ones (more than runScan holders, looked up by pid), a blocker with
// no row, a holder in a mode that does not conflict, and a blocker the
// Monitor did not see block the waiter at first.
func TestBoundRunsMatchKeyLookups(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	rnd := rand.New(rand.NewPCG(26, 11))
	modes := []string{"AccessShareLock", "RowExclusiveLock", "ShareLock", "ExclusiveLock", "AccessExclusiveLock"}
	for trial := range 200 {
		var locks []model.Lock
		sessions := map[int32]*model.Backend{}
		for key := range 1 + rnd.IntN(6) {
			kind, row := model.KindAdvisory, ""
			if key%2 == 1 {
				kind, row = model.KindRow, fmt.Sprintf("(0,%d)", key)
			}
			holders := rnd.IntN(2*runScan + 4)
			for h := range holders {
				pid := int32(100 + rnd.IntN(40))
				b := sessions[pid]
				if b == nil {
					b = &model.Backend{XactStart: t0.Add(-time.Duration(rnd.IntN(600)) * time.Second)}
					sessions[pid] = b
				}
				l := model.Lock{Kind: kind, Database: "db", EntityID: int64(key), Row: row, PID: pid, Backend: b,
					Mode: modes[rnd.IntN(len(modes))], Granted: true}
				if h%3 == 0 {
					l.HeldSince = t0.Add(-time.Duration(rnd.IntN(900)) * time.Second)
				}
				locks = append(locks, l)
			}
			for range rnd.IntN(6) {
				w := model.Lock{Kind: kind, Database: "db", EntityID: int64(key), Row: row, PID: int32(200 + rnd.IntN(10)),
					Mode: modes[rnd.IntN(len(modes))], WaitStart: t0.Add(-time.Duration(rnd.IntN(900)) * time.Second)}
				for range rnd.IntN(4) {
					w.BlockedBy = append(w.BlockedBy, int32(100+rnd.IntN(45))) // some name no row
				}
				locks = append(locks, w)
			}
		}
		// A Monitor's first sight of each wait: every other blocker.
		blocked := func(w int, pid int32) bool { return (int(pid)+w)%2 == 0 }
		for _, f := range []func(int, int32) bool{nil, blocked} {
			want, got := clone(locks), clone(locks)
			boundByKey(want, f)
			bound(got, f)
			for i := range want {
				if !want[i].HeldSince.Equal(got[i].HeldSince) {
					t.Fatalf("trial %d, row %d (pid %d, key %d, granted %v): HeldSince %v, want %v",
						trial, i, got[i].PID, got[i].EntityID, got[i].Granted, got[i].HeldSince, want[i].HeldSince)
				}
			}
		}
	}
}

func clone(locks []model.Lock) []model.Lock {
	c := slices.Clone(locks)
	for i := range c {
		c[i].BlockedBy = slices.Clone(c[i].BlockedBy)
	}
	return c
}
