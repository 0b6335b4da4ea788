package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/locktop/locktop/internal/poolstats"
	"github.com/locktop/locktop/internal/serve/metrics"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// sample is one gathered metric: its labels and its value (the sample count
// for a histogram).
type sample struct {
	labels map[string]string
	value  float64
}

func gather(t *testing.T, g prometheus.Gatherer, name string) []sample {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []sample
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.value = float64(m.GetHistogram().GetSampleCount())
			}
			out = append(out, s)
		}
	}
	return out
}

// value returns the value of the metric with exactly these labels.
func value(t *testing.T, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, s := range gather(t, g, name) {
		if len(s.labels) != len(want) {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}

func expect(t *testing.T, g prometheus.Gatherer, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := value(t, g, name, labels...)
	if !ok {
		t.Errorf("%s%v: missing; have %v", name, labels, gather(t, g, name))
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// Every locktop metric follows Prometheus' naming rules (promlint).
func TestLint(t *testing.T) {
	m := metrics.New()
	obs := m.Observer()
	obs(lockcore.Event{Kind: lockcore.EventAcquired, Key: lockcore.Pair(registry.SpaceAgent, 1), Blocking: true, Wait: time.Millisecond})
	obs(lockcore.Event{Kind: lockcore.EventReleased, Key: lockcore.Pair(registry.SpaceAgent, 1), Held: time.Millisecond})
	m.Snapshot(model.Snapshot{Taken: time.Now(), Locks: []model.Lock{{Kind: model.KindAdvisory, Pair: true, Namespace: "AGENT", Granted: true}}})
	m.AddPools(func() []model.PoolStats { return []model.PoolStats{{Name: "lock"}} })
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "locktop_") {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		if n := mf.GetName(); !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") && !strings.HasPrefix(n, "promhttp_") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.HasPrefix(n, "locktop_") {
			t.Errorf("metric %s does not start with locktop_", n)
		}
	}
	if _, ok := value(t, m.Registry(), "go_goroutines"); !ok {
		t.Error("the Go runtime collector is missing")
	}
}

// Every event kind lands in its counter, under the key's namespace label.
func TestObserverCountsEvents(t *testing.T) {
	m := metrics.New()
	obs := m.Observer()
	agent := lockcore.Pair(registry.SpaceAgent, 7)
	for _, e := range []lockcore.Event{
		{Kind: lockcore.EventAttempt, Key: agent, Blocking: true},
		{Kind: lockcore.EventAcquired, Key: agent, Blocking: true, Wait: 30 * time.Millisecond},
		{Kind: lockcore.EventAttempt, Key: agent},
		{Kind: lockcore.EventSkipped, Key: agent},
		{Kind: lockcore.EventAttempt, Key: agent, Blocking: true},
		{Kind: lockcore.EventTimeout, Key: agent, Blocking: true},
		{Kind: lockcore.EventReentrant, Key: agent, Blocking: true},
		{Kind: lockcore.EventCanceled, Key: agent, Blocking: true},
		{Kind: lockcore.EventFailed, Key: agent, Blocking: true},
		{Kind: lockcore.EventPhantom, Key: agent},
		{Kind: lockcore.EventAttempt, Key: lockcore.HashKey("t1:2026-01-01"), Blocking: true},
		{Kind: lockcore.EventAttempt, Key: lockcore.Int64(42424242)},
		{Kind: lockcore.EventAttempt, Key: lockcore.Pair(77, 1)},
	} {
		obs(e)
	}
	r := m.Registry()
	expect(t, r, 2, "locktop_lock_attempts_total", "namespace", "AGENT", "acquire", "blocking")
	expect(t, r, 1, "locktop_lock_attempts_total", "namespace", "AGENT", "acquire", "try")
	expect(t, r, 1, "locktop_lock_acquired_total", "namespace", "AGENT", "acquire", "blocking")
	expect(t, r, 1, "locktop_lock_wait_seconds", "namespace", "AGENT", "acquire", "blocking")
	expect(t, r, 1, "locktop_lock_held", "namespace", "AGENT")
	for _, name := range []string{"skipped", "timeouts", "reentrant_refusals", "canceled", "failures", "phantom_unlocks"} {
		expect(t, r, 1, "locktop_lock_"+name+"_total", "namespace", "AGENT")
	}
	// Hashed keys share one label; a registered fixed id has its name; an
	// unregistered space shows as its number.
	expect(t, r, 1, "locktop_lock_attempts_total", "namespace", metrics.LabelBigint, "acquire", "blocking")
	expect(t, r, 1, "locktop_lock_attempts_total", "namespace", "IDEMPOTENCY_CLEANUP", "acquire", "try")
	expect(t, r, 1, "locktop_lock_attempts_total", "namespace", "77", "acquire", "try")

	obs(lockcore.Event{Kind: lockcore.EventReleased, Key: agent, Blocking: true, Held: 2 * time.Second})
	expect(t, r, 0, "locktop_lock_held", "namespace", "AGENT")
	expect(t, r, 1, "locktop_lock_hold_seconds", "namespace", "AGENT")
	obs(lockcore.Event{Kind: lockcore.EventAcquired, Key: agent, Blocking: true})
	obs(lockcore.Event{Kind: lockcore.EventLost, Key: agent, Blocking: true, Held: time.Second})
	expect(t, r, 1, "locktop_lock_lost_total", "namespace", "AGENT")
	expect(t, r, 0, "locktop_lock_held", "namespace", "AGENT")
}

// Unregistered spaces get a label each up to MaxSpaceLabels, then share
// "other": a program that makes up spaces cannot blow up the series count.
func TestNamespaceCardinalityIsBounded(t *testing.T) {
	m := metrics.New()
	obs := m.Observer()
	for space := range int32(metrics.MaxSpaceLabels + 50) {
		obs(lockcore.Event{Kind: lockcore.EventAttempt, Key: lockcore.Pair(1000+space, 1)})
	}
	for i := range int64(500) {
		obs(lockcore.Event{Kind: lockcore.EventAttempt, Key: lockcore.HashKey(fmt.Sprint("tenant:", i))})
	}
	samples := gather(t, m.Registry(), "locktop_lock_attempts_total")
	if want := metrics.MaxSpaceLabels + 2; len(samples) != want {
		t.Errorf("%d series, want %d (spaces + other + bigint)", len(samples), want)
	}
	expect(t, m.Registry(), 50, "locktop_lock_attempts_total", "namespace", metrics.LabelOther, "acquire", "try")
	expect(t, m.Registry(), 500, "locktop_lock_attempts_total", "namespace", metrics.LabelBigint, "acquire", "try")
}

// Each snapshot replaces the last whole: a namespace that is gone
// disappears, and nothing is published before the first snapshot.
func TestSnapshotReplacesTheLast(t *testing.T) {
	m := metrics.New()
	r := m.Registry()
	if s := gather(t, r, "locktop_snapshot_locks_held"); len(s) != 0 {
		t.Fatalf("gauges before any snapshot: %v", s)
	}
	taken := time.Unix(1_800_000_000, 500_000_000)
	agent := func(id int64, granted bool, waited time.Duration) model.Lock {
		l := model.Lock{Kind: model.KindAdvisory, Database: "app", Pair: true, Namespace: "AGENT", EntityID: id, Granted: granted}
		if !granted {
			l.WaitStart = taken.Add(-waited)
		}
		return l
	}
	m.Snapshot(model.Snapshot{
		Taken: taken, Connections: 12, Latency: 3 * time.Millisecond,
		Locks: []model.Lock{
			agent(1, true, 0), agent(1, false, 2*time.Second), agent(1, false, 5*time.Second), agent(2, true, 0),
			{Kind: model.KindAdvisory, Database: "app", Pair: true, Namespace: "9", EntityID: 1, Granted: true},
			{Kind: model.KindAdvisory, Database: "other", EntityID: -5, Granted: true},
			{Kind: model.KindLease, Name: "map:m9", Namespace: "MAP", Owner: "w1", Granted: true},
		},
	})
	lbl := func(db, ns string) []string { return []string{"kind", "advisory", "database", db, "namespace", ns} }
	expect(t, r, 2, "locktop_snapshot_locks_held", lbl("app", "AGENT")...)
	expect(t, r, 2, "locktop_snapshot_locks_waiting", lbl("app", "AGENT")...)
	expect(t, r, 5, "locktop_snapshot_longest_wait_seconds", lbl("app", "AGENT")...)
	expect(t, r, 1, "locktop_snapshot_locks_held", lbl("app", "9")...)
	expect(t, r, 1, "locktop_snapshot_locks_held", lbl("other", metrics.LabelBigint)...)
	expect(t, r, 1, "locktop_snapshot_locks_held", "kind", "lease", "database", "", "namespace", "MAP")
	expect(t, r, 12, "locktop_snapshot_backends")
	expect(t, r, 1_800_000_000.5, "locktop_snapshot_timestamp_seconds")
	expect(t, r, 0.003, "locktop_snapshot_poll_seconds")

	m.Snapshot(model.Snapshot{Taken: taken.Add(time.Second), Locks: []model.Lock{agent(3, true, 0)}})
	expect(t, r, 1, "locktop_snapshot_locks_held", lbl("app", "AGENT")...)
	expect(t, r, 0, "locktop_snapshot_locks_waiting", lbl("app", "AGENT")...)
	if n := len(gather(t, r, "locktop_snapshot_locks_held")); n != 1 {
		t.Errorf("%d held series after the second snapshot, want 1 (the others vanished)", n)
	}
	m.PollFailed("")
	expect(t, r, 1, "locktop_monitor_poll_errors_total")
}

// Pool sources are read at every scrape; repeated names are kept apart.
func TestPools(t *testing.T) {
	m := metrics.New()
	r := m.Registry()
	inUse := int32(1)
	m.AddPools(func() []model.PoolStats {
		return []model.PoolStats{{Name: "lock", MaxConns: 10, Total: 3, InUse: inUse, Idle: 3 - inUse, Waiting: 2, Acquires: 40, Empty: 5, Canceled: 1, WaitTotal: 1500 * time.Millisecond}}
	})
	m.AddPools(func() []model.PoolStats {
		return []model.PoolStats{{Name: "work", MaxConns: 25}, {Name: "lock", MaxConns: 4}}
	})
	expect(t, r, 10, "locktop_pool_max_connections", "pool", "lock")
	expect(t, r, 25, "locktop_pool_max_connections", "pool", "work")
	expect(t, r, 4, "locktop_pool_max_connections", "pool", "lock-2")
	expect(t, r, 1, "locktop_pool_connections_in_use", "pool", "lock")
	expect(t, r, 3, "locktop_pool_connections", "pool", "lock")
	expect(t, r, 2, "locktop_pool_waiting", "pool", "lock")
	expect(t, r, 40, "locktop_pool_acquires_total", "pool", "lock")
	expect(t, r, 5, "locktop_pool_empty_acquires_total", "pool", "lock")
	expect(t, r, 1, "locktop_pool_canceled_acquires_total", "pool", "lock")
	expect(t, r, 1.5, "locktop_pool_acquire_wait_seconds_total", "pool", "lock")
	inUse = 3
	expect(t, r, 3, "locktop_pool_connections_in_use", "pool", "lock")
}

// The observer on a real lock service, and a snapshot from a real monitor,
// against the test database: a grant after a wait, a skip, a timeout, a
// refusal, and the held/waiting gauges while one connection waits.
func TestAgainstTheDatabase(t *testing.T) {
	ctx := context.Background()
	m := metrics.New()
	r := m.Registry()
	pool := pgtest.Pool(t, nil)
	// The Service's wait is the timeout the With below must reach, and also
	// bounds the TryWith's connect and session setup, which must succeed:
	// seconds, not the 300ms a loaded box may spend connecting.
	locks := lockcore.New(pool, lockcore.Observe(m.Observer()), lockcore.Wait(2*time.Second))
	m.AddPools(func() []model.PoolStats {
		return []model.PoolStats{poolstats.Of("lock", locks.Pool(), locks.Waiting())}
	})
	key := lockcore.Pair(registry.SpaceAgent, 9001)

	held, err := locks.Acquire(ctx, key, lockcore.Wait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Another context: the try is skipped, the blocking acquire times out.
	if ok, err := locks.TryWith(ctx, key, func(context.Context) error { return nil }); ok || err != nil {
		t.Fatalf("TryWith while held: %v, %v", ok, err)
	}
	if err := locks.With(ctx, key, func(context.Context) error { return nil }); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("With while held: %v, want ErrTimeout", err)
	}
	if err := locks.With(held.Context(), key, func(context.Context) error { return nil }); !errors.Is(err, lockcore.ErrReentrant) {
		t.Fatalf("nested With: %v, want ErrReentrant", err)
	}
	expect(t, r, 1, "locktop_lock_held", "namespace", "AGENT")

	// A waiter on a plain connection, seen by the pgsource.
	mon, err := pgsource.Connect(ctx, pgtest.DSN(t), pgsource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	waiter := pgtest.Conn(t)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Exec(wctx, "SELECT pg_advisory_lock(1, 9001)")
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		snap, err := mon.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, waiting := snap.Counts(); waiting > 0 {
			m.Snapshot(snap)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter never showed up")
		}
	}
	db := func() string {
		var name string
		if err := pool.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		return name
	}()
	expect(t, r, 1, "locktop_snapshot_locks_held", "kind", "advisory", "database", db, "namespace", "AGENT")
	expect(t, r, 1, "locktop_snapshot_locks_waiting", "kind", "advisory", "database", db, "namespace", "AGENT")

	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	expect(t, r, 2, "locktop_lock_attempts_total", "namespace", "AGENT", "acquire", "blocking")
	expect(t, r, 1, "locktop_lock_attempts_total", "namespace", "AGENT", "acquire", "try")
	expect(t, r, 1, "locktop_lock_acquired_total", "namespace", "AGENT", "acquire", "blocking")
	expect(t, r, 1, "locktop_lock_skipped_total", "namespace", "AGENT")
	expect(t, r, 1, "locktop_lock_timeouts_total", "namespace", "AGENT")
	expect(t, r, 1, "locktop_lock_reentrant_refusals_total", "namespace", "AGENT")
	expect(t, r, 1, "locktop_lock_hold_seconds", "namespace", "AGENT")
	expect(t, r, 0, "locktop_lock_held", "namespace", "AGENT")
	if v, ok := value(t, r, "locktop_pool_acquires_total", "pool", "lock"); !ok || v < 3 {
		t.Errorf("lock pool acquires = %v (%v), want at least 3", v, ok)
	}
}

// The time-blocked counter adds, at each poll, every waiter's wait since
// the poll before: a whole interval for one already waiting, the wait
// itself for one that began since, nothing on the first poll. It keeps its
// series when the waits end.
func TestWaitSecondsAccrue(t *testing.T) {
	m := metrics.New()
	r := m.Registry()
	t0 := time.Unix(1_800_000_000, 0)
	lbl := []string{"kind", "advisory", "database", "app", "namespace", "AGENT"}
	waiter := func(since time.Time) model.Lock {
		return model.Lock{Kind: model.KindAdvisory, Database: "app", Pair: true, Namespace: "AGENT", EntityID: 1, WaitStart: since}
	}
	holder := model.Lock{Kind: model.KindAdvisory, Database: "app", Pair: true, Namespace: "AGENT", EntityID: 1, Granted: true}

	// First poll: a 30 s wait already under way is history, not counted.
	m.Snapshot(model.Snapshot{Taken: t0, Locks: []model.Lock{holder, waiter(t0.Add(-30 * time.Second))}})
	expect(t, r, 0, "locktop_snapshot_wait_seconds_total", lbl...)
	// 2 s later: the old waiter adds 2 s, a new one that began 0.5 s ago adds 0.5 s.
	m.Snapshot(model.Snapshot{Taken: t0.Add(2 * time.Second), Interval: 2 * time.Second,
		Locks: []model.Lock{holder, waiter(t0.Add(-30 * time.Second)), waiter(t0.Add(1500 * time.Millisecond))}})
	expect(t, r, 2.5, "locktop_snapshot_wait_seconds_total", lbl...)
	// 1 s later: both add 1 s.
	m.Snapshot(model.Snapshot{Taken: t0.Add(3 * time.Second), Interval: time.Second,
		Locks: []model.Lock{holder, waiter(t0.Add(-30 * time.Second)), waiter(t0.Add(1500 * time.Millisecond))}})
	expect(t, r, 4.5, "locktop_snapshot_wait_seconds_total", lbl...)
	// The waits are over and the namespace is gone: the counter stays.
	m.Snapshot(model.Snapshot{Taken: t0.Add(4 * time.Second), Interval: time.Second})
	expect(t, r, 4.5, "locktop_snapshot_wait_seconds_total", lbl...)
	if s := gather(t, r, "locktop_snapshot_locks_waiting"); len(s) != 0 {
		t.Errorf("waiting gauges after the waits ended: %v", s)
	}
	// A lease waiter counts under its own kind and namespace.
	lease := model.Lock{Kind: model.KindLease, Name: "map:m1", Namespace: "MAP", WaitStart: t0.Add(4 * time.Second)}
	m.Snapshot(model.Snapshot{Taken: t0.Add(10 * time.Second), Interval: 6 * time.Second, Locks: []model.Lock{lease}})
	expect(t, r, 6, "locktop_snapshot_wait_seconds_total", "kind", "lease", "database", "", "namespace", "MAP")
}

// Lease recoveries are counted from the audit trail: each record once,
// only those newer than the first snapshot (the trail is history), under
// the resource's registered level; every level starts at 0.
func TestLeaseRecoveriesCounted(t *testing.T) {
	m := metrics.New()
	r := m.Registry()
	t0 := time.Unix(1_800_000_000, 0)
	old := model.Audit{Name: "map:m1", Actor: "w2", VictimOwner: "w1", At: t0.Add(-time.Hour)}
	m.Snapshot(model.Snapshot{Taken: t0, Audit: []model.Audit{old}})
	expect(t, r, 0, "locktop_lease_recoveries_total", "namespace", "MAP")
	expect(t, r, 0, "locktop_lease_recoveries_total", "namespace", "PROJECT")
	expect(t, r, 0, "locktop_lease_recoveries_total", "namespace", metrics.LabelOther)

	first := model.Audit{Name: "map:m2", Actor: "w3", VictimOwner: "w2", At: t0.Add(time.Second)}
	m.Snapshot(model.Snapshot{Taken: t0.Add(2 * time.Second), Audit: []model.Audit{first, old}})
	expect(t, r, 1, "locktop_lease_recoveries_total", "namespace", "MAP")
	// Seen again in the next poll's trail: not counted twice.
	second := model.Audit{Name: "whatever:9", Actor: "w4", At: t0.Add(3 * time.Second)}
	third := model.Audit{Name: "project:p1", Actor: "w4", At: t0.Add(3 * time.Second)}
	m.Snapshot(model.Snapshot{Taken: t0.Add(4 * time.Second), Audit: []model.Audit{second, third, first, old}})
	expect(t, r, 1, "locktop_lease_recoveries_total", "namespace", "MAP")
	expect(t, r, 1, "locktop_lease_recoveries_total", "namespace", "PROJECT")
	expect(t, r, 1, "locktop_lease_recoveries_total", "namespace", metrics.LabelOther)
}

// Of several targets, every metric of one target says which (server):
// lease recoveries, each trail counted on its own clock; poll errors; the
// pools of each target's monitor.
func TestByServerLabelsEveryTargetsMetrics(t *testing.T) {
	m := metrics.New(metrics.ByServer())
	r := m.Registry()
	ta, tb := time.Unix(1_800_000_000, 0), time.Unix(1_700_000_000, 0) // b's clock is far behind a's
	snap := func(da, db time.Duration, auditA, auditB []model.Audit) model.Snapshot {
		return model.Merge([]model.Part{
			{Name: "a/postgres", Snapshot: model.Snapshot{Taken: ta.Add(da)}},
			{Name: "a/lease", Snapshot: model.Snapshot{Taken: ta.Add(da), Audit: auditA}},
			{Name: "b/postgres", Snapshot: model.Snapshot{Taken: tb.Add(db)}},
			{Name: "b/lease", Snapshot: model.Snapshot{Taken: tb.Add(db), Audit: auditB}},
		})
	}
	m.Snapshot(snap(0, 0, nil, nil))
	expect(t, r, 0, "locktop_lease_recoveries_total", "server", "a", "namespace", "MAP")
	expect(t, r, 0, "locktop_lease_recoveries_total", "server", "b", "namespace", "MAP")
	onB := model.Audit{Name: "map:m1", Actor: "w2", At: tb.Add(time.Second)}
	m.Snapshot(snap(2*time.Second, 2*time.Second, nil, []model.Audit{onB}))
	m.Snapshot(snap(3*time.Second, 3*time.Second, nil, []model.Audit{onB}))
	expect(t, r, 0, "locktop_lease_recoveries_total", "server", "a", "namespace", "MAP")
	expect(t, r, 1, "locktop_lease_recoveries_total", "server", "b", "namespace", "MAP")

	m.Servers("a", "b")
	m.PollFailed("b")
	expect(t, r, 0, "locktop_monitor_poll_errors_total", "server", "a")
	expect(t, r, 1, "locktop_monitor_poll_errors_total", "server", "b")

	m.AddPools(func() []model.PoolStats {
		return []model.PoolStats{{Name: "a/monitor", MaxConns: 1}, {Name: "b/monitor", MaxConns: 1, InUse: 1}}
	})
	expect(t, r, 0, "locktop_pool_connections_in_use", "server", "a", "pool", "monitor")
	expect(t, r, 1, "locktop_pool_connections_in_use", "server", "b", "pool", "monitor")
}
