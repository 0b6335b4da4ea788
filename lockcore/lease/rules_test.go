package lease

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// The rules without a database: decide, planJobs, the order, the backoff.

func TestStaleNeedsAllThree(t *testing.T) {
	now := time.Unix(1000, 0)
	grace := 10 * time.Second
	stale := holder{leaseExpires: now.Add(-time.Second), heartbeat: now.Add(-11 * time.Second)}
	if !stale.stale(now, grace) {
		t.Fatal("lapsed, old heartbeat, no job: not stale")
	}
	for name, h := range map[string]holder{
		"lease live":      {leaseExpires: now.Add(time.Second), heartbeat: now.Add(-time.Hour)},
		"heartbeat fresh": {leaseExpires: now.Add(-time.Hour), heartbeat: now.Add(-9 * time.Second)},
		"job active":      {leaseExpires: now.Add(-time.Hour), heartbeat: now.Add(-time.Hour), jobActive: true},
	} {
		if h.stale(now, grace) {
			t.Errorf("%s: stale", name)
		}
	}
}

func TestDecide(t *testing.T) {
	now := time.Unix(1000, 0)
	live := func(tok string, m Mode) holder {
		return holder{token: tok, mode: m, leaseExpires: now.Add(time.Minute), heartbeat: now}
	}
	dead := func(tok string, m Mode) holder {
		return holder{token: tok, mode: m, leaseExpires: now.Add(-time.Minute), heartbeat: now.Add(-time.Hour)}
	}
	writer := waiter{id: "w", mode: Write, expires: now.Add(time.Second)}
	for _, c := range []struct {
		name    string
		s       state
		q       request
		grant   bool
		victims []string
		wait    bool
		lost    bool
	}{
		{name: "free", q: request{mode: Write}, grant: true},
		{name: "readers share", s: state{holders: []holder{live("a", Read)}}, q: request{mode: Read}, grant: true},
		{name: "writer blocked by reader", s: state{holders: []holder{live("a", Read)}}, q: request{mode: Write}},
		{name: "stale writer taken over", s: state{holders: []holder{dead("a", Write)}}, q: request{mode: Read}, grant: true, victims: []string{"a"}},
		{name: "stale and live: no takeover", s: state{holders: []holder{dead("a", Read), live("b", Read)}}, q: request{mode: Write}},
		{name: "stale compatible holder left alone", s: state{holders: []holder{dead("a", Read)}}, q: request{mode: Read}, grant: true},
		{name: "reader behind waiting writer", s: state{waiters: []waiter{writer}}, q: request{mode: Read}, wait: true},
		{name: "upgradeable behind waiting writer", s: state{waiters: []waiter{writer}}, q: request{mode: Upgradeable}, wait: true},
		{name: "writer not behind writer", s: state{waiters: []waiter{writer}}, q: request{mode: Write}, grant: true},
		{name: "own waiter row ignored", s: state{waiters: []waiter{writer}}, q: request{mode: Read, waiterID: "w"}, grant: true},
		{name: "expired waiter ignored", s: state{waiters: []waiter{{id: "x", mode: Write, expires: now}}}, q: request{mode: Read}, grant: true},
		{name: "upgrade waits for reader", s: state{holders: []holder{live("u", Upgradeable), live("r", Read)}},
			q: request{mode: Write, upgrade: true, token: "u"}},
		{name: "upgrade not held back by writers waiting", s: state{holders: []holder{live("u", Upgradeable)}, waiters: []waiter{writer}},
			q: request{mode: Write, upgrade: true, token: "u"}, grant: true},
		{name: "upgrade of a lost grant", s: state{holders: []holder{live("r", Read)}}, q: request{mode: Write, upgrade: true, token: "u"}, lost: true},
		{name: "upgrade of a lapsed grant", s: state{holders: []holder{dead("u", Upgradeable)}}, q: request{mode: Write, upgrade: true, token: "u"}, lost: true},
	} {
		c.s.now = now
		c.q.grace = 10 * time.Second
		v := decide(&c.s, c.q)
		var victims []string
		for _, h := range v.victims {
			victims = append(victims, h.token)
		}
		if v.grant != c.grant || !slices.Equal(victims, c.victims) || v.byWaiter != c.wait || v.lost != c.lost {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
}

func TestPlanJobsFair(t *testing.T) {
	now := time.Unix(1000, 0)
	job := func(id, project string, seq int64, running bool) jobRow {
		return jobRow{id: id, project: project, seq: seq, running: running, leaseExpires: now.Add(time.Minute)}
	}
	// 100 queued jobs of a big project, then one of a small one; one slot.
	var jobs []jobRow
	for i := range 100 {
		jobs = append(jobs, job(fmt.Sprintf("big%d", i), "big", int64(i), false))
	}
	jobs = append(jobs, job("small", "small", 100, false))
	p := planJobs(now, jobs, map[string]int64{"big": 5}, caps{global: 1})
	if !slices.Equal(p.start, []string{"small"}) {
		t.Errorf("started %v; the small project, never served, goes first", p.start)
	}
	// Two slots: one each.
	p = planJobs(now, jobs, nil, caps{global: 2})
	if len(p.start) != 2 || !slices.Contains(p.start, "small") {
		t.Errorf("two slots: %v", p.start)
	}
	// Caps: per project and map jobs per project, never exceeded; a full
	// project is skipped, not waited for.
	jobs = []jobRow{job("r1", "p", 0, true), job("q1", "p", 1, false), job("q2", "q", 2, false)}
	jobs[0].mapID = "m"
	q3 := job("q3", "q", 3, false)
	q3.mapID = "m"
	q4 := job("q4", "q", 4, false)
	q4.mapID = "m2"
	jobs = append(jobs, q3, q4)
	p = planJobs(now, jobs, nil, caps{global: 10, project: 1, maps: 1})
	if !slices.Equal(p.start, []string{"q2"}) {
		t.Errorf("with p full and one job per project: %v", p.start)
	}
	p = planJobs(now, jobs, nil, caps{global: 10, project: 3, maps: 1})
	if slices.Contains(p.start, "q3") && slices.Contains(p.start, "q4") {
		t.Errorf("two map jobs of q started: %v", p.start)
	}
	// A job whose lease passed frees its slot.
	jobs = []jobRow{job("dead", "p", 0, true), job("next", "p", 1, false)}
	jobs[0].leaseExpires = now
	p = planJobs(now, jobs, nil, caps{global: 1})
	if !slices.Equal(p.drop, []string{"dead"}) || !slices.Equal(p.start, []string{"next"}) {
		t.Errorf("dead job: %+v", p)
	}
}

func TestOrder(t *testing.T) {
	sorted := []Resource{Project("a"), Project("b"), Map("a"), Map("z"), Sketch("0"), Sketch("a")}
	for i := range sorted {
		for j := range sorted {
			if got, want := compare(sorted[i], sorted[j]), (i > j) == true; (got > 0) != want || (got == 0) != (i == j) {
				t.Errorf("compare(%s, %s) = %d", sorted[i], sorted[j], got)
			}
		}
	}
	for _, s := range []string{"project:a", "map:m-1", "sketch:x.y"} {
		r, err := ParseResource(s)
		if err != nil || r.String() != s || r.validate() != nil {
			t.Errorf("%s: %v %v", s, r, err)
		}
	}
	for _, s := range []string{"map:", "tile:1", "map:a:b", ""} {
		if _, err := ParseResource(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
	if Map(strings.Repeat("x", maxIDLen+1)).validate() == nil {
		t.Error("an id longer than a NOTIFY payload allows was accepted")
	}
}

func TestBackoffBounded(t *testing.T) {
	b := newBackoff(Options{Lease: 30 * time.Second})
	var last time.Duration
	for range 20 {
		last = b.next()
		if last < 5*time.Millisecond || last > time.Second {
			t.Fatalf("backoff %s out of bounds", last)
		}
	}
	if last < 500*time.Millisecond {
		t.Errorf("backoff stuck at %s", last)
	}
}

func TestOptions(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil || o.Lease != 30*time.Second || o.Heartbeat != 10*time.Second || o.Grace != 20*time.Second ||
		o.Wait != 30*time.Second || o.Schema != "locktop_lease" || o.Owner == "" {
		t.Errorf("defaults: %+v, %v", o, err)
	}
	if o, _ := (Options{Heartbeat: -1}).withDefaults(); o.Grace != 20*time.Second {
		t.Errorf("grace without heartbeats: %s", o.Grace)
	}
	for _, bad := range []Options{{Lease: 10 * time.Second, Heartbeat: 6 * time.Second}, {Schema: "Bad-Name"}, {Wait: -1}, {MaxGlobalJobs: -1}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

// The sentinels are distinct, and the family's shared ones match
// lockcore's, wrapped or not.
func TestErrorsFamily(t *testing.T) {
	mine := []error{ErrLocked, ErrTimeout, ErrLost, ErrLockOrder, ErrNotUpgradeable, ErrReleased, ErrClosed}
	for i, a := range mine {
		for j, b := range mine {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, i != j)
			}
		}
	}
	for mine, theirs := range map[error]error{ErrLocked: lockcore.ErrLocked, ErrTimeout: lockcore.ErrTimeout,
		ErrLost: lockcore.ErrLost, ErrReleased: lockcore.ErrReleased} {
		err := &Error{Op: "hold", Resource: Map("m"), Err: fmt.Errorf("%w: why", mine)}
		if !errors.Is(err, theirs) || !errors.Is(err, mine) {
			t.Errorf("%v does not match %v and %v", err, mine, theirs)
		}
	}
	if errors.Is(ErrLost, lockcore.ErrLocked) || errors.Is(ErrLockOrder, lockcore.ErrLost) {
		t.Error("a sentinel matches another meaning of lockcore's")
	}
}
