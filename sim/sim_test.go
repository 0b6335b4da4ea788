package sim_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/sim"
	"github.com/locktop/locktop/workers"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var schemaSeq atomic.Int32

func schema() string { return fmt.Sprintf("st_%d", schemaSeq.Add(1)) }

// newSim returns a simulator on a schema of its own (unless opts names
// one), small pools, closed when the test ends.
func newSim(t *testing.T, opts sim.Options) *sim.Sim {
	t.Helper()
	opts.DSN = pgtest.DSN(t)
	if opts.Schema == "" {
		opts.Schema = schema()
	}
	if opts.WorkMinConns == 0 {
		opts.WorkMinConns = 2
	}
	if opts.LockMaxConns == 0 {
		opts.LockMaxConns = 80
	}
	if opts.ConfigPath == "" {
		opts.ConfigPath = filepath.Join(t.TempDir(), "config.json")
	}
	if opts.StopGrace == 0 {
		// Work still under way a second into Stop is cancelled, as it is
		// after the default 5s: what Stop checks afterwards is the same.
		// On a loaded box work waits on locks for seconds, and runs waited
		// out the whole default grace (TestNoDeadlockElsewhere/steady:
		// 5-6s of its stop).
		opts.StopGrace = time.Second
	}
	withSystems(t, &opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sim.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newBareSim is newSim without the small pools and the config file of the
// test's own: what a caller who sets nothing gets.
func newBareSim(t *testing.T, opts sim.Options) *sim.Sim {
	t.Helper()
	opts.DSN = pgtest.DSN(t)
	opts.Schema = schema()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sim.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func broken(r sim.Report) string {
	var b []string
	for _, inv := range r.Invariants {
		if inv.Violations > 0 {
			b = append(b, fmt.Sprintf("%s: %d (%s)", inv.Name, inv.Violations, inv.Last))
		}
	}
	if r.AuditError != "" {
		b = append(b, "audit: "+r.AuditError)
	}
	return strings.Join(b, "; ")
}

func violations(r sim.Report, name workers.Invariant) int64 {
	for _, inv := range r.Invariants {
		if inv.Name == string(name) {
			return inv.Violations
		}
	}
	return -1
}

// The dashboard's embedded mode relies on this: "steady" shows a holder
// with a queued waiter on an AGENT key within seconds.
//
// Not parallel: AGENT keys are per database, and the other tests' waiters
// must not count.
func TestSteadyShowsQueuedWaiters(t *testing.T) {
	s := newSim(t, sim.Options{})
	mon := pgtest.Pool(t, nil)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		snap, err := pgsource.Inspect(context.Background(), mon)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(snap.Locks, func(l model.Lock) bool {
			return !l.Granted && l.Namespace == "AGENT" && len(l.BlockedBy) > 0
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no queued waiter on an AGENT key within 15s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if r := s.Report(); !r.OK {
		t.Errorf("steady broke invariants: %s", broken(r))
	}
}

// Every scenario keeps every invariant with the locks on. Scenarios whose
// point is a fault run until the fault has had its effect (a timeout, a
// lost lock), armed at the start rather than left to the scenario's rate.
func TestScenariosKeepInvariants(t *testing.T) {
	// effect is what a scenario must show before it stops, and the fault
	// that brings it about.
	effect := map[string]struct {
		fault string
		what  string
		seen  func(model.Counters) bool
	}{
		"timeouts":    {workers.FaultSlowBody, "a hook timed out", func(c model.Counters) bool { return c.Timeouts > 0 }},
		"kill-holder": {workers.FaultKillHolder, "a hook lost its lock", func(c model.Counters) bool { return c.Lost > 0 }},
	}
	for _, name := range sim.Scenarios() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := sim.Options{Scenario: name}
			if name == "scale" {
				opts.Agents, opts.Goroutines, opts.LockMaxConns = 300, 40, 40 // the full size is a benchmark
			}
			s := newSim(t, opts)
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			min := time.After(1500 * time.Millisecond)
			if e, ok := effect[name]; ok {
				for range 3 {
					if err := s.InjectFault(e.fault); err != nil {
						t.Fatal(err)
					}
				}
				waitStatus(t, e.what, s, func(st model.SimStatus) bool { return e.seen(st.Workers["hook"]) })
			}
			if name == "lock-order" {
				waitReport(t, "the inversion is reported", s, func(r sim.Report) bool { return len(r.LockOrderInversions) > 0 })
			}
			<-min
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			r := s.Report()
			if !r.OK {
				t.Errorf("invariants broken: %s", broken(r))
			}
			// Only the lock-order scenario takes locks in two orders.
			if inv := r.LockOrderInversions; name != "lock-order" && len(inv) > 0 {
				t.Errorf("lock-order inversions in %s: %v", name, inv)
			}
			if r.Sections == 0 && name != "deadlock" { // its cycles end in timeouts, not sections
				t.Error("no critical section completed")
			}
			if r.Scenario != name || !r.LocksEnabled {
				t.Errorf("report says scenario %q, locks %v", r.Scenario, r.LocksEnabled)
			}
		})
	}
}

// The lock-order scenario's two workloads take AGENT n and a
// conversation's session lock in opposite orders: the first acquire in the
// second order is reported at once, once, with both acquisition sites.
func TestLockOrderScenarioReportsTheInversion(t *testing.T) {
	s := newSim(t, sim.Options{Scenario: "lock-order"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitReport(t, "the inversion is reported", s, func(r sim.Report) bool { return len(r.LockOrderInversions) > 0 })
	time.Sleep(500 * time.Millisecond) // more of both orders: still one report
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if len(r.LockOrderInversions) != 1 {
		t.Fatalf("inversions %+v, want exactly one (AGENT and the session lock, reported once)", r.LockOrderInversions)
	}
	v := r.LockOrderInversions[0]
	classes := map[string]bool{v.From: true, v.To: true}
	if !classes["AGENT"] || len(classes) != 2 {
		t.Errorf("inversion between %s and %s, want AGENT and the session lock's class", v.From, v.To)
	}
	for _, site := range []string{v.Site, v.PathSite} { // each order's inner acquire
		if !strings.Contains(site, "sim/scenario.go:") {
			t.Errorf("acquisition site %q is not the scenario's workload", site)
		}
	}
	if v.Site == v.PathSite {
		t.Errorf("both sites are %s", v.Site)
	}
}

// waitReport polls s's report until cond holds, for up to 20s.
func waitReport(t *testing.T, what string, s *sim.Sim, cond func(sim.Report) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond(s.Report()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitStatus polls s's status until cond holds, for up to 60s.
func waitStatus(t *testing.T, what string, s *sim.Sim, cond func(model.SimStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond(s.Status()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With the locks off, what the dashboard's locks switch is for shows while
// the scenario runs, not only in the final audit at Stop: a summary call
// made twice (the claims are inside open transactions), a lost config key
// (the file is checked every second), an event applied by both its hook
// and the reconciler (the hook's capture stalls past the reconcile grace).
func TestNoLocksShowsLive(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		inv      workers.Invariant
	}{
		{"summary-dedup", workers.InvSummaryOnce},
		{"config-race", workers.InvConfigKeys},
		{"reconciler-race", workers.InvExactlyOnce},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, sim.Options{Scenario: tc.scenario, NoLocks: true})
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, string(tc.inv)+" is broken", s, func(st model.SimStatus) bool {
				return slices.ContainsFunc(st.Invariants, func(i model.Invariant) bool { return i.Name == string(tc.inv) && i.Violations > 0 })
			})
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// With the locks off the checks catch the races. The interleaving is
// forced: the first hook on agent 1 waits, after reading, until a second
// section of agent 1 has entered.
func TestNoLocksIsCaught(t *testing.T) {
	t.Parallel()
	var first atomic.Bool
	second := make(chan struct{})
	var once sync.Once
	hooks := &workers.Hooks{At: func(ctx context.Context, p workers.Point, agent int32) {
		if agent != 1 {
			return
		}
		switch p {
		case workers.PointApplyChecked:
			if first.CompareAndSwap(false, true) {
				select {
				case <-second:
				case <-ctx.Done():
				}
			}
		case workers.PointEntered:
			if first.Load() {
				once.Do(func() { close(second) })
			}
		}
	}}
	s := newSim(t, sim.Options{Scenario: "hook-storm", NoLocks: true, Hooks: hooks})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second:
	case <-time.After(20 * time.Second):
		t.Fatal("no second section on the hot agent")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if r.OK || r.LocksEnabled {
		t.Errorf("report: ok %v, locks %v; want a failed run without locks", r.OK, r.LocksEnabled)
	}
	if violations(r, workers.InvNoOverlap) == 0 {
		t.Errorf("overlapping sections not caught: %s", broken(r))
	}
}

// Two simulators on one database share the agents and keep every
// invariant: the locks live in PostgreSQL. They run until both have worked
// on one agent.
func TestTwoSimulatorsShareAgents(t *testing.T) {
	t.Parallel()
	sch := schema()
	a := newSim(t, sim.Options{Scenario: "reaper-contention", Schema: sch})
	b := newSim(t, sim.Options{Scenario: "reaper-contention", Schema: sch})
	for _, s := range []*sim.Sim{a, b} {
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
	}
	mon := pgtest.Pool(t, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var shared int
		err := mon.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM (SELECT agent_id FROM %s.rmw_log
			GROUP BY agent_id HAVING count(DISTINCT proc) = 2) x`, sch)).Scan(&shared)
		if err != nil {
			t.Fatal(err)
		}
		if shared > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two simulators never worked on the same agent")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for _, s := range []*sim.Sim{a, b} {
		wg.Go(func() {
			if err := s.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, s := range []*sim.Sim{a, b} {
		if r := s.Report(); !r.OK {
			t.Errorf("simulator %d: %s", i, broken(r))
		}
	}
}

// A section held by one simulator makes the other's hook on the same agent
// queue in PostgreSQL; with the locks off the other enters, and the overlap
// is caught across the two.
//
// Not parallel: the other tests' waiters on AGENT 1 must not count.
func TestCrossProcessExclusion(t *testing.T) {
	for _, locking := range []bool{true, false} {
		t.Run(fmt.Sprintf("locks=%v", locking), func(t *testing.T) {
			sch := schema()
			gate := make(chan struct{})
			in := make(chan struct{})
			var once sync.Once
			hooks := &workers.Hooks{At: func(ctx context.Context, p workers.Point, agent int32) {
				if p == workers.PointEntered && agent == 1 {
					once.Do(func() {
						close(in)
						select {
						case <-gate:
						case <-ctx.Done():
						}
					})
				}
			}}
			a := newSim(t, sim.Options{Scenario: "config-race", Schema: sch, Hooks: hooks, NoLocks: !locking})
			b := newSim(t, sim.Options{Scenario: "config-race", Schema: sch, NoLocks: !locking})
			ctx := context.Background()
			ha := make(chan error, 1)
			go func() { ha <- a.Env().Hook(ctx, workers.RouteNotification, 1) }()
			<-in
			hb := make(chan error, 1)
			go func() { hb <- b.Env().Hook(ctx, workers.RoutePreToolUse, 1) }()
			mon := pgtest.Pool(t, nil)
			if locking {
				deadline := time.Now().Add(20 * time.Second)
				for {
					var waiting int
					err := mon.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
						AND classid = 1 AND objid = 1 AND objsubid = 2 AND NOT granted
						AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting)
					if err != nil {
						t.Fatal(err)
					}
					if waiting > 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the second simulator's hook did not queue behind the first's")
					}
					time.Sleep(5 * time.Millisecond)
				}
			} else if err := <-hb; err != nil {
				t.Fatal(err)
			}
			close(gate)
			if err := <-ha; err != nil {
				t.Fatal(err)
			}
			if locking {
				if err := <-hb; err != nil {
					t.Fatal(err)
				}
			}
			// Neither ran its drivers; Start and Stop run the final checks.
			for _, s := range []*sim.Sim{a, b} {
				if err := s.Start(); err != nil {
					t.Fatal(err)
				}
				if err := s.Stop(); err != nil {
					t.Fatal(err)
				}
			}
			rb := b.Report()
			if locking {
				if !rb.OK || !a.Report().OK {
					t.Errorf("invariants broken: %s / %s", broken(a.Report()), broken(rb))
				}
			} else if violations(rb, workers.InvNoOverlap) == 0 {
				t.Errorf("the second simulator did not see the first's section: %s", broken(rb))
			}
		})
	}
}

// The seed's single pool of 25: waiters hold every connection, holders
// starve, and the run ends in timeouts, not a hang, with every invariant
// kept. It runs until the first timeout.
func TestPoolExhaustionSharedPool(t *testing.T) {
	t.Parallel()
	s := newSim(t, sim.Options{Scenario: "pool-exhaustion", SharedPool: true, LockTimeout: 400 * time.Millisecond})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "a hook timed out", s, func(st model.SimStatus) bool { return st.Workers["hook"].Timeouts > 0 })
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if !r.OK {
		t.Errorf("invariants broken: %s", broken(r))
	}
	if len(r.Pools) != 1 || r.Pools[0].Name != "shared" || r.Pools[0].MaxConns != 25 {
		t.Errorf("pools %+v, want one shared pool of 25", r.Pools)
	}
}

// A run on a schema that an earlier run without locks damaged inherits
// none of its violations: each run judges only its own work. Without
// locks, a hook whose capture stalls writes the applied counter it read
// long before, after others moved it on: the counter goes back, and the
// next run's writes repeat values the damaging run wrote.
func TestNoInheritedViolations(t *testing.T) {
	t.Parallel()
	sch := schema()
	damage := newSim(t, sim.Options{Scenario: "reconciler-race", Schema: sch, NoLocks: true, HookRate: 40})
	if err := damage.Start(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "the run without locks has done damage", damage, func(st model.SimStatus) bool {
		return st.Workers["hook"].Acquired >= 60 &&
			slices.ContainsFunc(st.Invariants, func(i model.Invariant) bool { return i.Name == string(workers.InvExactlyOnce) && i.Violations > 0 })
	})
	if err := damage.Close(); err != nil {
		t.Logf("the damaging run: %v", err) // its violations, as the report says
	}
	// Without damage left behind the correct run below would prove nothing.
	if r := damage.Report(); r.OK || violations(r, workers.InvExactlyOnce) == 0 {
		t.Fatalf("the run without locks left no damage behind: ok %v, %s", r.OK, broken(r))
	}
	s := newSim(t, sim.Options{Scenario: "reconciler-race", Schema: sch, HookRate: 40})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, "the correct run has done some work", s, func(st model.SimStatus) bool { return st.Workers["hook"].Acquired >= 80 })
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if r := s.Report(); !r.OK {
		t.Errorf("a correct run reports violations: %s", broken(r))
	}
}
