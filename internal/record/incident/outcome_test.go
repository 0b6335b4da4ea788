package incident

import (
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// The DDL pile-up ended by killing its root: a relation held by 1, an
// ALTER (2) queued behind it, a SELECT (3) queued behind the ALTER. 1 is
// terminated; in the next snapshot the queue has cleared at once (the
// ALTER was granted, ran, and the SELECT after it), and the server shows
// no grant of a relation no one waits for. They were granted, not "gone"
// (the report said "ENDED gone"). A waiter that leaves while its blocker
// still holds the key gave up: that one is "gone".
func TestWaitersGrantedWhenBlockerLeaves(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rel := func(pid int32, granted bool, mode string, since time.Time, behind ...int32) model.Lock {
		l := model.Lock{Kind: model.KindRelation, PID: pid, Database: "app", Relation: "public.orders", Mode: mode, Granted: granted, BlockedBy: behind}
		if granted {
			l.HeldSince = since
		} else {
			l.WaitStart = since
		}
		return l
	}
	var f frames
	for s := range 6 {
		snap := model.Snapshot{Taken: at(s)}
		switch {
		case s < 3:
			snap.Locks = []model.Lock{
				rel(1, true, "AccessShareLock", at(-60)),
				rel(2, false, "AccessExclusiveLock", at(0), 1),
				rel(3, false, "AccessShareLock", at(1), 2),
				// 4 waits on AGENT 5 behind 9, gives up at 3 while 9 holds on.
				hold(9, 5, at(-5)), wait(4, 5, at(0), 9),
			}
		case s < 5:
			snap.Locks = []model.Lock{hold(9, 5, at(-5))}
		}
		f = append(f, snap)
	}
	r, err := Build(f, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range r.Waits {
		got[w.Waiter] = w.Outcome
	}
	want := map[string]string{"2": "granted", "3": "granted", "4": "gone"}
	for who, o := range want {
		if got[who] != o {
			t.Errorf("waiter %s ended %q, want %q (all: %v)", who, got[who], o, got)
		}
	}
}
