package sim_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/sim"
	"github.com/locktop/locktop/workers"
)

// withSystems gives a test's simulator what seeds 002 and 004 need: a
// Redis of its own when the scenario runs turns (unless opts names one),
// and a lease schema of its own.
func withSystems(t *testing.T, opts *sim.Options) {
	t.Helper()
	if sys, _ := sim.SystemsOf(opts.Scenario); sys&(sim.SystemTurns|sim.SystemDeadlocks) != 0 && opts.RedisURL == "" {
		opts.RedisURL = redistest.Private(t).URL()
	}
	if opts.LeaseSchema == "" {
		opts.LeaseSchema = opts.Schema + "_lease"
	}
}

// With the locks off, seed 002's and 004's races show while the scenario
// runs, on both lease stores.
func TestNoLocksShowsLiveTurnsAndJobs(t *testing.T) {
	for _, tc := range []struct {
		scenario, store string
		inv             workers.Invariant
	}{
		{"acf", "", workers.InvTurnSequence},
		{"fole", sim.LeasePostgres, workers.InvJobCaps},
		{"fole", sim.LeaseSQLite, workers.InvExclusiveWriter},
	} {
		t.Run(tc.scenario+"/"+tc.store, func(t *testing.T) {
			t.Parallel()
			s := newSim(t, sim.Options{Scenario: tc.scenario, NoLocks: true, LeaseStore: tc.store})
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, string(tc.inv)+" is broken", s, func(st model.SimStatus) bool {
				return slices.ContainsFunc(st.Invariants, func(i model.Invariant) bool { return i.Name == string(tc.inv) && i.Violations > 0 })
			})
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			if r := s.Report(); r.OK {
				t.Error("the report of a run without locks says OK")
			}
		})
	}
}

// Each system's faults, injected, have their effect and break nothing:
// a crashed pod's turns are cut off, a dead worker's lease and a stalled
// one's are recovered with an audit record, the stalled one stops before
// writing. A fault of a system the scenario does not run is an error.
func TestSystemFaults(t *testing.T) {
	s := newSim(t, sim.Options{Scenario: "all", LeaseStore: sim.LeaseSQLite})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pod-crash", "worker-dies", "heartbeat-stall", "interrupted-write", "message-burst"} {
		if err := s.InjectFault(f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	waitStatus(t, "the stalled writer lost its lease", s, func(st model.SimStatus) bool { return st.Workers["map_writer"].Lost > 0 })
	// The dead worker's grant is recovered once its lease and the grace
	// have run out, which on a loaded box can be after the stall shows:
	// the store's own audit says when (the report counts it at the stop).
	leases, err := lease.OpenSQLite(context.Background(), s.Where().LeasePath, lease.Options{Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer leases.Close()
	pgtest.Eventually(t, "a recovery in the lease store's audit", func() bool {
		recs, err := leases.Audit(context.Background())
		return err == nil && len(recs) > 0
	})
	// The stalled writer looks at its lease when its stall is over (past
	// its lease and grace); a Stop before that cuts the stall short, and on
	// a loaded box the waits above can be over first (make test beside two
	// CPU hogs: stalls 1, stopped before writing 0).
	pgtest.Eventually(t, "the stalled writer stopped before writing", func() bool {
		j := s.Report().Jobs
		return j != nil && j.StaleStopped > 0
	})
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	if !r.OK {
		t.Errorf("invariants broken: %s", broken(r))
	}
	if r.Turns == nil || r.Jobs == nil {
		t.Fatalf("report without turns or jobs: %+v", r)
	}
	if r.Turns.PodCrashes < 1 || r.Jobs.Deaths < 1 || r.Jobs.Stalls < 1 || r.Jobs.StaleStopped < 1 || r.Jobs.Recoveries < 1 {
		t.Errorf("turns %+v, jobs %+v: want a pod crash, a death, a stall stopped before writing and a recovery", r.Turns, r.Jobs)
	}
	if w := s.Where(); w.LeaseStore != sim.LeaseSQLite || filepath.Base(w.LeasePath) != "leases.db" || w.RedisURL == "" {
		t.Errorf("Where() = %+v", w)
	}

	steady := newSim(t, sim.Options{})
	if err := steady.InjectFault("pod-crash"); err == nil {
		t.Error("a pod crash injected into steady, which runs no turns")
	}
	if err := steady.InjectFault("no-such"); !errors.Is(err, sim.ErrUnknownFault) {
		t.Errorf("unknown fault: %v", err)
	}
}

// A scenario switch shows the new scenario's workers and invariants only,
// and a scenario that needs Redis without one is unusable.
func TestSwitchToTurns(t *testing.T) {
	s := newSim(t, sim.Options{RedisURL: redistest.Private(t).URL()})
	if _, ok := s.Status().Workers["hook"]; !ok {
		t.Fatal("steady shows no hook counters")
	}
	if err := s.SetScenario("acf"); err != nil {
		t.Fatal(err)
	}
	st := s.Status()
	if _, ok := st.Workers["hook"]; ok {
		t.Error("acf shows seed 001's hook counters")
	}
	if _, ok := st.Workers["turn"]; !ok || !slices.ContainsFunc(st.Invariants, func(i model.Invariant) bool { return i.Name == string(workers.InvAnsweredOnce) }) {
		t.Errorf("acf shows workers %v, invariants %v", st.Workers, st.Invariants)
	}
	bare := newSim(t, sim.Options{})
	if err := bare.SetScenario("acf"); !errors.Is(err, sim.ErrNoRedis) {
		t.Errorf("acf without a Redis: %v, want ErrNoRedis", err)
	}
}
