package ui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
)

// fakeLockSource is a source.Source answering from a queue of results; the
// last one repeats.
type fakeLockSource struct {
	name    string
	mu      sync.Mutex
	results []SnapshotMsg
	polls   int
}

func (f *fakeLockSource) Name() string { return f.name }

func (f *fakeLockSource) Poll(context.Context) (model.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.polls++
	r := f.results[0]
	if len(f.results) > 1 {
		f.results = f.results[1:]
	}
	return r.Snapshot, r.Err
}

// redisLocks is a session mutex held by an owner with a waiter behind it,
// as the Redis source will report them.
func redisLocks() model.Snapshot {
	return model.Snapshot{Taken: t0, Locks: []model.Lock{
		{Kind: model.KindRedis, Namespace: "SESSION", Name: "sesslock:t1:a1:c1:web", Owner: "worker-7f3a", Mode: "exclusive",
			Granted: true, Expires: t0.Add(12 * time.Second)},
		{Kind: model.KindRedis, Namespace: "SESSION", Name: "sesslock:t1:a1:c1:web", Owner: "worker-9b1c", Mode: "exclusive",
			QueuePos: 1, WaitStart: t0.Add(-2 * time.Second), BlockedByOwners: []string{"worker-7f3a"}},
	}}
}

// Each source reports on its own: a failing one shows its own banner and
// keeps its last locks, while the server's keep updating; one table holds
// both, with a KIND column once there are two kinds.
func TestSourcesReportSeparately(t *testing.T) {
	redis := &fakeLockSource{name: "redis", results: []SnapshotMsg{{Snapshot: redisLocks()}, {Err: errors.New("dial unix /tmp/redis.sock: connect: connection refused")}}}
	h := newHarness(t, Options{Sources: []source.Source{redis}})
	h.start(120, 36)
	v := ansi.Strip(h.view())
	if !hasLine(v, "KIND") || !hasLine(v, "redis", "worker-7f3a", "ttl 12s") || !hasLine(v, "advisory", "AGENT 7", "4242") {
		t.Fatalf("one table for both sources, with their kinds:\n%s", v)
	}
	if !hasLine(v, "PID/OWNER") {
		t.Errorf("the holder column does not say it holds owners too:\n%s", v)
	}
	// Redis fails: its banner, its locks kept; the server polls on.
	h.step(tickMsg{source: 1, seq: h.m.poll.feeds[1].seq})
	changed := sample()
	changed.Locks = changed.Locks[:1]
	h.src.results = []SnapshotMsg{{Snapshot: changed}}
	h.step(h.tick())
	golden(t, "screen_two_sources_lost_120x36", h.view())
	v = ansi.Strip(h.view())
	if !strings.Contains(v, "redis: no connection · retry 1 in 1s") || strings.Contains(v, "PostgreSQL: no connection") {
		t.Errorf("the banner is not redis's alone:\n%s", v)
	}
	// The table row of AGENT 9 is gone; the event log tells its episode ended.
	if !hasLine(v, "worker-7f3a") || hasLine(v, "AGENT 9", "4300") {
		t.Errorf("redis's last locks are gone, or the server's did not update:\n%s", v)
	}
	if got := h.armed[len(h.armed)-1]; got != time.Second {
		t.Errorf("the server's loop re-armed at %v, not its interval", got)
	}
	if h.feed().conn != connOK || h.m.poll.feeds[1].conn != connLost {
		t.Errorf("states: server %d, redis %d", h.feed().conn, h.m.poll.feeds[1].conn)
	}
	// kind: filters across kinds.
	h.keys("/")
	h.typeText("kind:redis")
	h.keys("enter")
	if h.m.table.shown != 1 {
		t.Errorf("kind:redis shows %d keys", h.m.table.shown)
	}
}

// A source that answers in part (a Redis Cluster with a primary down)
// shows its locks and a banner naming the missing part; a listing cut short
// says so; both go when the source answers whole again.
func TestSourceAnswersInPart(t *testing.T) {
	part := redisLocks()
	part.Partial = []string{"10.0.0.2:7000: dial tcp 10.0.0.2:7000: connect: connection refused"}
	part.Truncated = true
	redis := &fakeLockSource{name: "redis", results: []SnapshotMsg{{Snapshot: part}, {Snapshot: redisLocks()}}}
	h := newHarness(t, Options{Sources: []source.Source{redis}})
	h.start(120, 36)
	golden(t, "screen_source_in_part_120x36", h.view())
	v := ansi.Strip(h.view())
	if !strings.Contains(v, "redis: part missing · 10.0.0.2:7000: dial tcp") || !strings.Contains(v, "redis: more locks than listed") {
		t.Errorf("no banner for the missing node or the cut listing:\n%s", v)
	}
	if !hasLine(v, "redis", "worker-7f3a") || h.m.poll.feeds[1].conn != connOK {
		t.Errorf("the answering nodes' locks are not shown:\n%s", v)
	}
	h.step(tickMsg{source: 1, seq: h.m.poll.feeds[1].seq})
	if v := ansi.Strip(h.view()); strings.Contains(v, "part missing") || strings.Contains(v, "more locks than listed") {
		t.Errorf("the banners stay after a whole answer:\n%s", v)
	}
}

// The mode is derived from the options once, in one place.
func TestModeLabel(t *testing.T) {
	term := func(context.Context, int32) error { return nil }
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "read-only"},
		{Options{ThrowAway: true, Simulator: &fakeSim{}}, "throw-away server"},
		{Options{Simulator: &fakeSim{}}, "simulator attached"},
		{Options{Terminate: term}, "terminate allowed"},
		{Options{Simulator: &fakeSim{}, Terminate: term}, "simulator attached · terminate allowed"},
	} {
		if got := tc.opts.mode(); got != tc.want {
			t.Errorf("%+v: mode %q, want %q", tc.opts, got, tc.want)
		}
	}
}

// The header names the server as pg_activity does, at every width, and
// the operator's warnings are on screen.
func TestHeaderNamesServerAndWarns(t *testing.T) {
	const server = "monitor@db-prod-eu-west-1.example.com:5432/app"
	const warning = "--http 0.0.0.0:9753 is reachable from other machines, and /api/advisory-locks shows other sessions' queries"
	for _, w := range []int{80, 120, 200} {
		h := newHarness(t, Options{Server: server, Warnings: []string{warning}})
		h.start(w, 30)
		v := ansi.Strip(h.view())
		if first := strings.SplitN(v, "\n", 2)[0]; !strings.Contains(first, server) {
			t.Errorf("%d cells: the header does not name the server: %q", w, first)
		}
		if !strings.Contains(strings.Join(strings.Fields(v), " "), strings.Join(strings.Fields(warning), " ")) {
			t.Errorf("%d cells: the warning is not on screen whole:\n%s", w, v)
		}
		if title := h.m.View().WindowTitle; !strings.Contains(title, server) {
			t.Errorf("window title %q", title)
		}
	}
}
