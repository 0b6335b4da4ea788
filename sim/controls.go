// Live controls: the scenario, the rates and workers, locks on or off.

package sim

import (
	"context"
	"fmt"
	"time"
)

// Scenarios lists the scenario names SetScenario accepts.
func (s *Sim) Scenarios() []string { return Scenarios() }

// SetScenario switches to the named scenario: the running workloads stop
// and the old run ends as Stop ends it (final reconcile, audit, leak
// check: what they find is reported as the old run's); then the counters,
// the invariant counts and the controls' scales start from zero, and the
// new scenario's workloads start. The new run judges only its own work.
func (s *Sim) SetScenario(name string) error {
	sc, ok := lookup(name)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownScenario, name)
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	wasRunning := s.stopDrivers()
	if wasRunning {
		_ = s.finish() // its findings are events and log lines of the old run
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.env.Begin(ctx); err != nil {
		return err
	}
	s.rec.reset()
	s.env.Faults.Clear()
	if s.turns != nil {
		s.turns.ResetStats()
	}
	if s.jobs != nil {
		s.jobs.ResetStats()
	}
	s.mu.Lock()
	s.opts.Scenario = name
	s.ran = 0
	s.audited, s.auditErr = false, nil
	s.mu.Unlock()
	s.thrMu.Lock()
	s.thrAt, s.thrN, s.thrRate = time.Time{}, 0, 0
	s.thrMu.Unlock()
	if err := s.configure(ctx, sc); err != nil {
		return err
	}
	if wasRunning {
		return s.start()
	}
	return nil
}

// maxScale bounds the controls' scales (and 1/maxScale below), so a key
// held down cannot scale the workload to nothing or to millions.
const maxScale = 64

// ScaleRates multiplies every rate of the running scenario by factor and
// returns how many rates it changed: rates without a limit stay without
// one. Rates are scaled exactly, from the scenario's own: ×1.25 then ×0.8
// gives the scenario's rates back. The scale stays within 1/64 and 64 of
// the scenario's. A scenario switch starts at its own rates again.
func (s *Sim) ScaleRates(factor float64) int {
	if factor <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateScale = min(max(s.rateScale*factor, 1.0/maxScale), maxScale)
	s.applyScales()
	n := 0
	for _, d := range s.sc.Drivers {
		if d.Rate > 0 {
			n++
		}
	}
	return n
}

// ScaleWorkers multiplies the workers of the running scenario by factor
// and returns the new total of goroutines: each driver's goroutines are
// the scenario's times the product of the factors so far, rounded to a
// whole number and never below one, so the total moves by about factor
// (26 goroutines ×1.25 make 32, ×0.8 then 26 again: a driver of one
// goroutine stays at one until the scale reaches 1.5). Workers are added
// or removed while the scenario runs (a removed one finishes its unit of
// work first). A scenario switch starts with its own numbers again.
func (s *Sim) ScaleWorkers(factor float64) int {
	if factor <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workerScale = min(max(s.workerScale*factor, 1.0/maxScale), maxScale)
	s.applyScales()
	total := 0
	for _, d := range s.sc.Drivers {
		total += d.Goroutines
	}
	return total
}

// applyScales recomputes the scenario from its base and the scales and
// hands the rates and goroutine counts to the running drivers. s.mu must
// be held.
func (s *Sim) applyScales() {
	s.sc = s.scaled()
	if s.run == nil {
		return
	}
	for i, d := range s.sc.Drivers {
		s.run.drivers[i].setRate(d.Rate)
		if !s.run.stopping {
			s.setLoops(s.run, s.run.drivers[i], d.Goroutines)
		}
	}
}

// setLoops starts or stops goroutines of d until n run. s.mu must be held
// and r must not be stopping.
func (s *Sim) setLoops(r *runState, d *driver, n int) {
	for len(d.cancels) < n {
		s.addLoop(r, d)
	}
	for len(d.cancels) > n {
		last := len(d.cancels) - 1
		d.cancels[last]()
		d.cancels = d.cancels[:last]
	}
}

// SetLocks turns every lock on or off while running; off shows the races.
func (s *Sim) SetLocks(on bool) { s.env.SetLocking(on) }

// ToggleLocks turns every lock off if they are on, and on if they are off,
// and returns the new state. Two toggles at once cancel out, whichever
// runs first.
func (s *Sim) ToggleLocks() bool { return s.env.ToggleLocking() }

// DescribeScenario says what a scenario runs and what happens in it, for
// the dashboard's picker.
func (s *Sim) DescribeScenario(name string) string {
	d, _ := Describe(name)
	return d
}

// faultNotes say what each fault does and what to watch for.
var faultNotes = map[string]string{
	"kill-holder":     "the next hook's lock backend is terminated mid-section · watch: the next waiter gets AGENT n, the holder's late write is refused by the fence (a contained loss)",
	"slow-body":       "the next hook section outlasts the lock timeout · watch: its waiters time out, the reconciler applies their events later",
	"reentrant":       "the next hook section takes its own key again · watch: a reentrant refusal in the event log, no deadlock",
	faultBurst:        "30 hooks at once on the hottest agent · watch: a long queue under one ROOT, drained in order",
	faultPodCrash:     "a pod crashes mid-turn · watch: its Redis hold lingers until the TTL frees the conversation, then the next turn takes it",
	faultOutage:       "Redis stops answering for 1.5s · watch: the redis source's banner, turns failing or waiting, then recovering",
	faultMessageBurst: "10 messages delivered twice each on one conversation · watch: the queue on its session mutex; no message applied twice",
	faultDies:         "a worker dies holding a map's write lease · watch: the lease goes stale, a manager recovers it (the audit says so)",
	faultStall:        "a writer's heartbeats stall past its lease · watch: the lease passes, another writer takes it, the stale one is fenced off",
	faultInterrupt:    "the next map write stops half-way · watch: readers never see the half-written tile set",
	faultFlood:        "16 jobs of project p1 at once · watch: the project lease's queue, one job at a time",
}

// DescribeFault says what a fault does and what to watch for, for the
// dashboard's picker.
func (s *Sim) DescribeFault(name string) string { return faultNotes[name] }
