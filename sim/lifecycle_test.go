package sim_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/sim"
	"github.com/locktop/locktop/workers"
)

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
	if n := s.ScaleRates(2); n != 3 {
		t.Errorf("ScaleRates changed %d rates, want the scenario's 3", n)
	}
	if got := hooksPerS(); got != 2*before {
		t.Errorf("hooks/s %v after doubling %v", got, before)
	}
	// kill-holder: 16 hook goroutines, one for kills, one reconciler.
	if n := s.ScaleWorkers(0.5); n != 8+1+1 {
		t.Errorf("%d goroutines after halving, want 10", n)
	}
	// Doubling after halving is the scenario's own numbers again.
	if n := s.ScaleWorkers(2); n != 16+1+1 {
		t.Errorf("%d goroutines after halving and doubling, want 18", n)
	}
	if n := s.ScaleWorkers(2); n != 32+2+2 {
		t.Errorf("%d goroutines after doubling, want 36", n)
	}
	if g := s.Report().Goroutines; g != 36 {
		t.Errorf("report: %d goroutines, want 36", g)
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
	if s.Status().Workers["hook"].Lost == 0 {
		t.Error("the killed holders did not show as lost locks")
	}
	// A switch starts the counters, the scales and the pending faults
	// afresh: "steady" kills no holder, and runs its own 62 goroutines.
	if err := s.SetScenario("steady"); err != nil {
		t.Fatal(err)
	}
	if st := s.Status(); st.Scenario != "steady" || !st.Running || st.Workers["hook"].Lost != 0 {
		t.Errorf("after the switch: %s, running %v, %d lost locks", st.Scenario, st.Running, st.Workers["hook"].Lost)
	}
	if g := s.Report().Goroutines; g != 62 {
		t.Errorf("after the switch: %d goroutines, want steady's 62", g)
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
	if r.Scenario != "steady" || r.Workers["hook"].Lost != 0 {
		t.Errorf("the report is of %s with %d lost locks; want steady's run alone", r.Scenario, r.Workers["hook"].Lost)
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

// A scenario switch gives the new scenario the lock pool it has when it
// starts first: "scale" queues its hook goroutines on as many lock
// connections either way.
func TestSwitchKeepsTheScenariosLockPool(t *testing.T) {
	t.Parallel()
	lockMax := func(s *sim.Sim) int32 {
		for _, p := range s.Status().Pools {
			if p.Name == "lock" {
				return p.MaxConns
			}
		}
		return -1
	}
	first := newBareSim(t, sim.Options{Scenario: "scale", Agents: 10})
	switched := newBareSim(t, sim.Options{Agents: 10})
	if err := switched.SetScenario("scale"); err != nil {
		t.Fatal(err)
	}
	if a, b := lockMax(first), lockMax(switched); a != b || a < 200 {
		t.Errorf("scale's lock pool: %d connections started first, %d after a switch; want the same, at least 200", a, b)
	}
}

// Each simulator edits a config file of its own by default, removed when
// it closes.
func TestConfigFileOfItsOwn(t *testing.T) {
	t.Parallel()
	a := newBareSim(t, sim.Options{})
	b := newBareSim(t, sim.Options{})
	pa, pb := a.Env().ConfigPath, b.Env().ConfigPath
	if pa == pb {
		t.Fatalf("two simulators share %s", pa)
	}
	if err := a.Env().EditConfig(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(pa)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, %s: %v; want it gone", filepath.Dir(pa), err)
	}
}

// The report counts every driver's goroutines, and those of the hook
// drivers apart: "deferred-stop-race" drives its hooks through stop races.
func TestReportCountsEveryGoroutine(t *testing.T) {
	t.Parallel()
	r := newSim(t, sim.Options{Scenario: "deferred-stop-race"}).Report()
	if r.Goroutines != 12+4 || r.HookGoroutines != 0 {
		t.Errorf("goroutines %d (hook %d), want 16 (0): 12 stop races and 4 background workers", r.Goroutines, r.HookGoroutines)
	}
}

// While Stop waits for the work under way, nothing from outside joins the
// run: a burst of hooks asked for then is refused, and more workers only
// change the numbers the next run starts with.
func TestStoppingTakesNoNewWork(t *testing.T) {
	t.Parallel()
	inside, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hooks := &workers.Hooks{At: func(ctx context.Context, p workers.Point, _ int32) {
		if p != workers.PointEntered {
			return
		}
		once.Do(func() {
			close(inside)
			select {
			case <-gate:
			case <-ctx.Done():
			}
		})
	}}
	s := newSim(t, sim.Options{Scenario: "config-race", Hooks: hooks, StopGrace: time.Minute})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inside:
	case <-time.After(20 * time.Second):
		t.Fatal("no section entered")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop() }()
	waitStatus(t, "the simulator is stopping", s, func(st model.SimStatus) bool { return !st.Running })
	if err := s.InjectFault("hook-burst"); err == nil {
		t.Error("a burst of hooks joined a stopping run")
	}
	hooksBefore := s.Status().Workers["hook"].Attempts
	s.ScaleWorkers(4)
	close(gate)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// config-race has 4 hook goroutines; the one held inside was the only
	// section that could still run to its end.
	if n := s.Status().Workers["hook"].Attempts - hooksBefore; n > 4 {
		t.Errorf("%d hooks attempted after Stop began, want at most the 4 under way", n)
	}
}
