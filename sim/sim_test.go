package sim_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/pgtest"
	"github.com/locktop/locktop/lockcore"
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sim.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runFor runs s for d and returns its report.
func runFor(t *testing.T, s *sim.Sim, d time.Duration) sim.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	return s.Report()
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
		snap, err := lockcore.Inspect(context.Background(), mon)
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

// Every scenario keeps every invariant with the locks on.
func TestScenariosKeepInvariants(t *testing.T) {
	for _, name := range sim.Scenarios() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := sim.Options{Scenario: name}
			if name == "scale" {
				opts.Agents, opts.Goroutines, opts.LockMaxConns = 300, 40, 40 // the full size is a benchmark
			}
			s := newSim(t, opts)
			r := runFor(t, s, 1500*time.Millisecond)
			if !r.OK {
				t.Errorf("invariants broken: %s", broken(r))
			}
			if r.Sections == 0 {
				t.Error("no critical section completed")
			}
			if r.Scenario != name || !r.LocksEnabled {
				t.Errorf("report says scenario %q, locks %v", r.Scenario, r.LocksEnabled)
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
// invariant: the locks live in PostgreSQL.
func TestTwoSimulatorsShareAgents(t *testing.T) {
	t.Parallel()
	sch := schema()
	a := newSim(t, sim.Options{Scenario: "reaper-contention", Schema: sch})
	b := newSim(t, sim.Options{Scenario: "reaper-contention", Schema: sch})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range []*sim.Sim{a, b} {
		wg.Go(func() {
			if err := s.Run(ctx); err != nil {
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
	var shared int
	mon := pgtest.Pool(t, nil)
	err := mon.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM (SELECT agent_id FROM %s.rmw_log
		GROUP BY agent_id HAVING count(DISTINCT proc) = 2) x`, sch)).Scan(&shared)
	if err != nil {
		t.Fatal(err)
	}
	if shared == 0 {
		t.Error("the two simulators never worked on the same agent")
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
// kept.
func TestPoolExhaustionSharedPool(t *testing.T) {
	t.Parallel()
	s := newSim(t, sim.Options{Scenario: "pool-exhaustion", SharedPool: true, LockTimeout: 400 * time.Millisecond})
	r := runFor(t, s, 2*time.Second)
	if !r.OK {
		t.Errorf("invariants broken: %s", broken(r))
	}
	if r.Workers["hook"].Timeouts == 0 {
		t.Error("no timeouts with the shared pool exhausted")
	}
	if len(r.Pools) != 1 || r.Pools[0].Name != "shared" || r.Pools[0].MaxConns != 25 {
		t.Errorf("pools %+v, want one shared pool of 25", r.Pools)
	}
}

func TestControls(t *testing.T) {
	t.Parallel()
	// A short lock timeout: the slow-body fault holds a hot agent for 1.5
	// times it, and AGENT keys are shared with the parallel tests.
	s := newSim(t, sim.Options{Scenario: "kill-holder", LockTimeout: 300 * time.Millisecond})
	if err := s.SetScenario("nonsense"); !errors.Is(err, sim.ErrUnknownScenario) {
		t.Errorf("unknown scenario: %v", err)
	}
	if err := s.InjectFault("nonsense"); !errors.Is(err, sim.ErrUnknownFault) {
		t.Errorf("unknown fault: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if !st.Running || st.Scenario != "kill-holder" || !st.LocksEnabled || len(st.Pools) != 2 {
		t.Errorf("status %+v", st)
	}
	hooksPerS := func() float64 {
		for _, r := range s.Status().Rates {
			if r.Name == "hooks/s" {
				return r.Value
			}
		}
		return -1
	}
	before := hooksPerS()
	s.ScaleRates(2)
	if got := hooksPerS(); got != 2*before {
		t.Errorf("hooks/s %v after doubling %v", got, before)
	}
	if err := s.SetRate("hooks/s", 5); err != nil || hooksPerS() != 5 {
		t.Errorf("SetRate: %v, %v", err, hooksPerS())
	}
	if err := s.SetWorkers("hook", 3); err != nil || s.Workers()["hook"] != 3 {
		t.Errorf("SetWorkers: %v, %v", err, s.Workers())
	}
	if err := s.SetWorkers("summariser", 3); err == nil {
		t.Error("SetWorkers accepted a kind the scenario does not drive")
	}
	for _, f := range s.Faults() {
		if err := s.InjectFault(f); err != nil {
			t.Errorf("fault %s: %v", f, err)
		}
	}
	// The event stream reports the kill-holder scenario's lost locks.
	deadline := time.After(20 * time.Second)
	for lost := false; !lost; {
		select {
		case ev := <-s.Events():
			lost = ev.Outcome == model.OutcomeLost
		case <-deadline:
			t.Fatal("no lost-lock event")
		}
	}
	if err := s.SetScenario("steady"); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.Scenario != "steady" || !st.Running {
		t.Errorf("after the switch: %s, running %v", st.Scenario, st.Running)
	}
	s.SetLocks(false)
	if s.Status().LocksEnabled {
		t.Error("locks still on")
	}
	s.SetLocks(true)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if !r.OK {
		t.Errorf("invariants broken: %s", broken(r))
	}
	if r.Workers["hook"].Errors == 0 {
		t.Error("the killed holders did not show as errors")
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestUnusableDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := sim.New(ctx, sim.Options{DSN: "postgres://nobody@/nodb?host=/nonexistent-locktop&connect_timeout=2"})
	if !errors.Is(err, sim.ErrUnusable) {
		t.Errorf("unreachable server: %v, want ErrUnusable", err)
	}
	_, err = sim.New(ctx, sim.Options{DSN: pgtest.DSN(t), Scenario: "nonsense"})
	if !errors.Is(err, sim.ErrUnknownScenario) {
		t.Errorf("unknown scenario: %v", err)
	}
}
