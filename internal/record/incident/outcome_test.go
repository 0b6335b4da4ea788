package incident

import (
	"errors"
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

// The queue's sparkline shows the queue as the snapshots showed it: a
// column no snapshot falls in carries the queue of the last one before it
// (it had not emptied: the sparkline had blank columns in the middle of its
// peak), and a column in which the source was down is a gap, drawn as
// such, not as an empty queue.
func TestQueueSparklineGaps(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var f frames
	queue := func(ms int) model.Snapshot {
		return model.Snapshot{Taken: at(ms), Locks: []model.Lock{hold(1, 1, at(-1000)), wait(2, 1, at(0), 1), wait(3, 1, at(0), 1)}}
	}
	// Dense polling at first (the adaptive poll while anyone waits), then
	// sparse: many columns get no snapshot.
	for ms := 0; ms < 2000; ms += 100 {
		f = append(f, queue(ms))
	}
	for ms := 2000; ms <= 60000; ms += 10000 {
		f = append(f, queue(ms))
	}
	// An outage of 20 s, then the queue again, then empty.
	f = append(f, model.Outage("postgres", errors.New("connection refused"), at(61000)))
	f = append(f, model.Outage("postgres", errors.New("connection refused"), at(81000)))
	f = append(f, queue(82000), model.Snapshot{Taken: at(90000)})
	r, err := Build(f, "", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	line := Sparkline(r.Queue.Samples, r.Queue.Gaps...)
	runes := []rune(line)
	// Every column up to the outage shows the queue of two.
	outageFrom := int(int64(61*time.Second) * int64(len(runes)) / int64(90*time.Second))
	for i := 0; i < outageFrom; i++ {
		if runes[i] == ' ' {
			t.Fatalf("column %d blank in the middle of the queue: %q", i, line)
		}
	}
	if len(r.Queue.Gaps) == 0 {
		t.Fatalf("no gap for the outage: %q", line)
	}
	for _, g := range r.Queue.Gaps {
		if g < outageFrom-1 || runes[g] != '·' {
			t.Fatalf("gap %d misplaced or not drawn as one: %q (gaps %v)", g, line, r.Queue.Gaps)
		}
	}
	if runes[len(runes)-1] != ' ' {
		t.Fatalf("the empty queue at the end is not blank: %q", line)
	}
}
