package ui

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/model"
)

// The DDL pile-up of issue 21, as the monitor reads it: an open
// transaction's long SELECT holds public.accounts, an ALTER TABLE waits
// behind it and four SELECTs behind the ALTER; a row-lock queue where A
// (5403) holds row (0,6) and waits for row (0,5), held by B (5401); and
// two advisory queues. Sixteen rows, four root blockers.

// pileSession is one session of the pile-up: its pid and the mode the
// screen must show for it.
type pileSession struct {
	pid  int32
	mode string
}

func pileup() model.Snapshot {
	rel := func(pid int32, app, mode string, granted bool) model.Lock {
		l := model.Lock{Kind: model.KindRelation, PID: pid, Database: "app", Backend: &model.Backend{User: "app_rw", ApplicationName: app, State: "active"},
			LockType: "relation", Relation: "public.accounts", Mode: mode, Granted: granted}
		return l
	}
	row := func(pid int32, app, tuple, mode string, granted bool) model.Lock {
		return model.Lock{Kind: model.KindRow, PID: pid, Database: "app", Backend: &model.Backend{User: "app_rw", ApplicationName: app, State: "active", Query: "SELECT * FROM orders WHERE id = 5 FOR UPDATE"},
			LockType: "transactionid", Relation: "public.orders", Row: tuple, Mode: mode, Granted: granted,
		}
	}
	long := rel(5301, "report", "AccessShareLock", true)
	lb := long.OwnBackend()
	lb.State, lb.Query = "active", "SELECT count(*), pg_sleep(600) FROM accounts"
	alter := waiting(rel(5302, "migrate", "AccessExclusiveLock", false), 1, 40*time.Second, 5301)
	alter.OwnBackend().Query = "ALTER TABLE accounts ADD COLUMN note text"
	locks := []model.Lock{
		held(lock("AGENT", 7, 4242, "locktop.lock", true), 12*time.Second),
		waiting(lock("AGENT", 7, 4250, "hook.stop", false), 1, 6*time.Second, 4242),
		waiting(lock("AGENT", 7, 4251, "hook.prompt", false), 2, 1500*time.Millisecond, 4242),
		held(lock("AGENT", 9, 4300, "worker.reaper", true), 90*time.Second),
		waiting(lock("AGENT", 9, 4301, "hook.stop", false), 1, 200*time.Millisecond, 4300),
	}
	b := row(5401, "checkout", "(0,5)", "ExclusiveLock", true)
	bb := b.OwnBackend()
	bb.State, bb.StateChange, b.HeldSince = "idle in transaction", t0.Add(-2*time.Minute), t0.Add(-2*time.Minute)
	locks = append(locks,
		b,
		waiting(row(5403, "checkout", "(0,5)", "ShareLock", false), 1, 50*time.Second, 5401),
		waiting(row(5404, "checkout", "(0,5)", "AccessExclusiveLock", false), 2, 20*time.Second, 5401),
		row(5403, "checkout", "(0,6)", "ExclusiveLock", true),
		waiting(row(5405, "refund", "(0,6)", "ShareLock", false), 1, 45*time.Second, 5403),
		long, alter,
	)
	for i, pid := range []int32{5303, 5304, 5305, 5306} {
		l := waiting(rel(pid, "api", "AccessShareLock", false), 2+i, time.Duration(35-5*i)*time.Second, 5302)
		l.OwnBackend().Query = "SELECT * FROM accounts WHERE id = " + strconv.Itoa(i+1)
		locks = append(locks, l)
	}
	return model.Snapshot{Taken: t0, Locks: locks, Connections: 30, Latency: 2 * time.Millisecond, Interval: time.Second, NewWaits: 0}
}

// pileSessions are the rows of pileup with the mode each must show.
func pileSessions() []pileSession {
	snap := pileup()
	out := make([]pileSession, 0, len(snap.Locks))
	for _, l := range snap.Locks {
		out = append(out, pileSession{l.PID, l.Mode})
	}
	return out
}

// modeShown reports whether line shows mode whole: its name as the table
// spells it or PostgreSQL's short name.
func modeShown(line, mode string) bool {
	for _, m := range []string{modeText(mode), shortMode(mode)} {
		for _, f := range strings.Fields(line) {
			if f == m {
				return true
			}
		}
	}
	return false
}

// pileDashboard is a monitor-only dashboard on the pile-up at w×h.
func pileDashboard(t *testing.T, w, h int) *harness {
	t.Helper()
	hs := newHarness(t, Options{Source: &fakeSource{info: info, results: []SnapshotMsg{{Snapshot: pileup()}}}})
	hs.start(w, h)
	return hs
}

// At 80×24 every row of the pile-up is on screen with its mode, and no
// key is cut to its shared prefix.
func TestPileupFitsAt80x24(t *testing.T) {
	hs := pileDashboard(t, 80, 24)
	v := ansi.Strip(hs.view())
	checkFrame(t, hs.view(), 80, 24)
	lines := strings.Split(v, "\n")
	for _, s := range pileSessions() {
		pid := strconv.Itoa(int(s.pid))
		found := false
		for _, l := range lines {
			if strings.Contains(l, " "+pid+" ") && modeShown(l, s.mode) {
				found = true
			}
		}
		if !found {
			t.Errorf("pid %s with mode %s (%s) is not on screen:\n%s", pid, modeText(s.mode), shortMode(s.mode), v)
		}
	}
	if strings.Contains(v, "rows 1–") {
		t.Errorf("the table scrolls:\n%s", v)
	}
	for _, cut := range []string{"public.orders r…", "public.accounts ro…", "Acce…"} {
		if strings.Contains(v, cut) {
			t.Errorf("%q: the distinguishing part is cut:\n%s", cut, v)
		}
	}
}

// The pile-up at the common sizes, as goldens.
func TestGoldenPileup(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {120, 36}, {160, 50}, {200, 60}} {
		hs := pileDashboard(t, sz[0], sz[1])
		checkFrame(t, hs.view(), sz[0], sz[1])
		golden(t, "pileup_"+strconv.Itoa(sz[0])+"x"+strconv.Itoa(sz[1]), hs.view())
	}
}

// redisQueue is a Redis session mutex whose owners share a long prefix,
// as pods of one deployment name themselves: a holder and three waiters.
func redisQueue() model.Snapshot {
	const prefix = "p30893-46239fcd7e21-"
	rt := t0
	owner := func(s string) string { return prefix + s }
	locks := []model.Lock{{Kind: model.KindRedis, Name: "sesslock:t1:a1:c1:web", Namespace: "SESSION", Owner: owner("brain-1"), Token: "a1b2c3",
		Fence: 42, Mode: "exclusive", Granted: true, HeldSince: rt.Add(-5 * time.Second), Expires: rt.Add(25 * time.Second)}}
	for i, o := range []string{"brain-2", "brain-3", "brain-12"} {
		locks = append(locks, model.Lock{Kind: model.KindRedis, Name: "sesslock:t1:a1:c1:web", Namespace: "SESSION", Owner: owner(o),
			Token: "d4e5f" + strconv.Itoa(i), Mode: "exclusive", QueuePos: i + 1, WaitStart: rt.Add(-time.Duration(3-i) * time.Second),
			BlockedByOwners: []string{owner("brain-1")}})
	}
	return model.Snapshot{Taken: rt, Locks: locks}
}

// Owners that share a long prefix stay apart: in the table (holder and
// BLOCKED BY) at 80 and 120 cells, and in the details' queue.
func TestRedisOwnersSharingAPrefix(t *testing.T) {
	snap := redisQueue()
	st := DefaultStyles()
	k := DefaultKeyMap()
	for _, w := range []int{60, 80, 120} {
		tb := newLockTable(&st, &k)
		tb.SetSize(w, 8)
		tb.SetSnapshot(&snap)
		v := ansi.Strip(tb.View())
		for _, o := range []string{"brain-1 ", "brain-2 ", "brain-3 ", "brain-12 "} {
			if !strings.Contains(v, o) {
				t.Errorf("%d cells: owner …%s is not told apart:\n%s", w, o, v)
			}
		}
		golden(t, "redis_prefix_table_"+strconv.Itoa(w)+"x8", tb.View())
	}
	d := describeLock(&st, &snap, &snap.Locks[1], "", nil, 76)
	queue := ansi.Strip(d[strings.Index(d, "Queue of"):])
	for _, o := range []string{"brain-1 ", "brain-2 ", "brain-3 ", "brain-12 "} {
		if !strings.Contains(queue, o) {
			t.Errorf("the details' queue does not tell …%s apart:\n%s", o, queue)
		}
	}
	golden(t, "redis_prefix_details", d)
}

// The details' queue of the pile-up's table shows each mode whole.
func TestDetailsQueueModesWhole(t *testing.T) {
	snap := pileup()
	st := DefaultStyles()
	d := ansi.Strip(describeLock(&st, &snap, &snap.Locks[11], "app", nil, 76))
	queue := d[strings.Index(d, "Queue of"):]
	for _, m := range []string{"AccessShare ", "AccessExclusive "} {
		if !strings.Contains(queue, m) {
			t.Errorf("the queue does not show %q whole:\n%s", m, queue)
		}
	}
}

// The root blockers are marked with their cost and come first, the
// costliest first; w draws the whole forest.
func TestPileupRootBlockers(t *testing.T) {
	hs := pileDashboard(t, 80, 24)
	v := ansi.Strip(hs.view())
	lines := strings.Split(v, "\n")
	first := 0
	for i, l := range lines {
		if strings.Contains(l, "KEY") && strings.Contains(l, "STATE") {
			first = i + 1
			break
		}
	}
	if !hasLine(lines[first], "public.accounts", "ROOT", "5301", "5w") {
		t.Errorf("the costliest root blocker (5301, 5 behind it) is not first and marked:\n%s", v)
	}
	for _, root := range [][]string{{"ROOT", "5401", "3w"}, {"ROOT", "4242", "2w"}, {"ROOT", "4300", "1w"}} {
		if !hasLine(v, root...) {
			t.Errorf("root %v is not marked:\n%s", root, v)
		}
	}
	if hasLine(v, "ROOT", "5403") {
		t.Errorf("5403 waits, yet is marked a root:\n%s", v)
	}
	hs.keys("w")
	if !isOpen[*forest](hs) {
		t.Fatalf("w does not open the wait-for forest:\n%s", ansi.Strip(hs.view()))
	}
	golden(t, "pileup_forest_80x24", hs.view())
	hs.keys("esc")
	hs2 := pileDashboard(t, 120, 36)
	hs2.keys("w")
	golden(t, "pileup_forest_120x36", hs2.view())
}
