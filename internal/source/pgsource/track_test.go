package pgsource

import (
	"fmt"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// A Monitor that has seen more names than maxNames renumbers the ones it
// still remembers: the grants it tracks keep their held times and the
// waits it saw stay old, and the interner shrinks to what is in use.
func TestTrackRenumbersNames(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	m := &Monitor{seenWaits: map[grantID][]int32{}}
	snap := func(at time.Time) model.Snapshot {
		s := model.Snapshot{Taken: at, Locks: []model.Lock{
			{Kind: model.KindAdvisory, PID: 10, Database: "db", Namespace: "AGENT", EntityID: 7, Pair: true, Mode: model.ModeExclusive, Granted: true},
			{Kind: model.KindAdvisory, PID: 11, Database: "db", Namespace: "AGENT", EntityID: 7, Pair: true, Mode: model.ModeExclusive, WaitStart: t0},
		}}
		queue(s.Locks)
		return s
	}
	// A name seen once, long ago, so that the ones in use are not numbered 1.
	m.keyNames.id(&model.Lock{Kind: model.KindAdvisory, Database: "db", Namespace: "999", Mode: model.ModeExclusive})
	first := snap(t0)
	m.track(&first)
	// Many namespaces come and go (an unregistered space per tenant).
	for i := range maxNames + 1 {
		m.keyNames.id(&model.Lock{Kind: model.KindAdvisory, Database: "db", Namespace: fmt.Sprint(1000 + i), Mode: model.ModeExclusive})
	}
	later := snap(t0.Add(time.Minute))
	m.track(&later)
	if got := len(m.keyNames.byID); got > 2 {
		t.Errorf("the interner holds %d names after renumbering, want the 2 in use", got)
	}
	if h := later.Locks[0]; !h.HeldSince.Equal(t0) {
		t.Errorf("the holder's held since %v after renumbering, want %v (first seen)", h.HeldSince, t0)
	}
	if later.NewWaits != 0 {
		t.Errorf("%d new waits after renumbering, want 0: the wait was seen before", later.NewWaits)
	}
}
