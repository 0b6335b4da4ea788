// Faults injected while running.

package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Faults lists the fault names InjectFault accepts: those of the lock
// systems the current scenario runs.
func (s *Sim) Faults() []string {
	s.mu.Lock()
	sys := s.sc.Systems
	s.mu.Unlock()
	var out []string
	for _, f := range faults {
		if sys&f.sys != 0 {
			out = append(out, f.name)
		}
	}
	return out
}

// InjectFault injects the named fault once. Seed 001's: kill-holder (the
// next hook section terminates its own lock's backend), slow-body (the
// next hook section outlasts the lock timeout), reentrant (the next hook
// section tries to take its key again), hook-burst (30 hooks at once on the
// hottest agent). Seed 002's: pod-crash, redis-outage (1.5s),
// message-burst (10 messages delivered twice each on the hottest
// conversation). Seed 004's: worker-dies (holding a map's write lease),
// heartbeat-stall, interrupted-write (the next map write), project-flood
// (16 jobs of p1 at once). A fault of a system the scenario does not run
// is an error.
func (s *Sim) InjectFault(name string) error {
	i := slices.IndexFunc(faults, func(f struct {
		name string
		sys  System
	}) bool {
		return f.name == name
	})
	if i < 0 {
		return fmt.Errorf("%w %q", ErrUnknownFault, name)
	}
	s.mu.Lock()
	sys := s.sc.Systems
	s.mu.Unlock()
	if sys&faults[i].sys == 0 {
		return fmt.Errorf("sim: fault %s: scenario %s does not run its lock system", name, s.Status().Scenario)
	}
	switch name {
	case faultPodCrash:
		s.turns.CrashPod()
		return nil
	case faultInterrupt:
		s.jobs.InterruptNext()
		return nil
	case faultOutage, faultMessageBurst, faultDies, faultStall, faultFlood:
		return s.runFault(func(ctx context.Context) {
			switch name {
			case faultOutage:
				_ = s.outage(ctx)
			case faultMessageBurst:
				fns := make([]func() error, 0, 20)
				for range 10 {
					m := s.turns.NewMessage()
					fns = append(fns, func() error { return s.turns.Deliver(ctx, 1, m) }, func() error { return s.turns.Deliver(ctx, 1, m) })
				}
				_ = both(fns...)
			case faultDies:
				_ = unitDie(s, ctx)
			case faultStall:
				_ = unitStall(s, ctx)
			case faultFlood:
				_ = unitFlood(s, ctx)
			}
		})
	}
	if name == faultBurst {
		return s.runFault(func(ctx context.Context) {
			fns := make([]func() error, 30)
			for i := range fns {
				fns[i] = func() error { return s.env.Hook(ctx, pickRoute(), 1) }
			}
			_ = both(fns...)
		})
	}
	if !s.env.Faults.Add(name, 1) {
		return fmt.Errorf("%w %q (have %v)", ErrUnknownFault, name, s.Faults())
	}
	return nil
}

// runFault runs fn within the current run (Stop waits for it).
func (s *Sim) runFault(fn func(ctx context.Context)) error {
	s.mu.Lock()
	r := s.run
	if r != nil && !r.stopping {
		r.wg.Add(1)
	} else {
		r = nil
	}
	s.mu.Unlock()
	if r == nil {
		return errors.New("sim: not running")
	}
	go func() {
		defer r.wg.Done()
		fn(r.work)
	}()
	return nil
}
