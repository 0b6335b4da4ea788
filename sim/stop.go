// Stopping: the drivers first, then the checks of what was left behind.

package sim

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Stop stops the workloads: no new work starts, work under way may finish
// for StopGrace and is then cancelled (every lock is released either way).
// Then it applies the events still pending (a final reconcile), audits the
// database and checks that no lock or connection is left. Stopping a
// stopped simulator does nothing.
func (s *Sim) Stop() error {
	s.ctl.Lock()
	defer s.ctl.Unlock()
	if !s.stopDrivers() {
		return nil
	}
	return s.finish()
}

// stopDrivers ends the current run; it reports false if none was running.
func (s *Sim) stopDrivers() bool {
	s.mu.Lock()
	r := s.run
	if r != nil {
		r.stopping = true
	}
	s.mu.Unlock()
	if r == nil {
		return false
	}
	r.stopGen()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	t := time.NewTimer(s.opts.StopGrace)
	select {
	case <-done:
	case <-t.C:
		s.rec.stopping.Store(true)
		r.cancelWork()
		<-done
	}
	t.Stop()
	r.cancelWork()
	s.mu.Lock()
	s.run = nil
	s.ran += time.Since(s.started)
	s.mu.Unlock()
	return true
}

// finish drains, audits and checks for leaks after a run. Against a server
// that was declared gone, or does not answer now, it does not try: the
// final checks are then reported as not run.
func (s *Sim) finish() error {
	if s.isGone() {
		s.mu.Lock()
		s.audited, s.auditErr = true, fmt.Errorf("final checks skipped: %w", s.goneErr)
		s.mu.Unlock()
		return s.goneErr
	}
	pctx, pcancel := context.WithTimeout(context.Background(), finishProbe)
	err := s.workPool.Ping(pctx)
	pcancel()
	if err != nil {
		err = fmt.Errorf("final checks skipped: the server does not answer: %w", err)
		s.mu.Lock()
		s.audited, s.auditErr = true, err
		s.mu.Unlock()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var errs []error
	if _, err := s.env.Drain(ctx); err != nil {
		errs = append(errs, fmt.Errorf("final reconcile: %w", err))
	}
	if err := s.env.Audit(ctx); err != nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	sys := s.sc.Systems
	s.mu.Unlock()
	if err := s.auditSystems(ctx, sys); err != nil {
		errs = append(errs, err)
	}
	if err := s.checkLeaks(ctx); err != nil {
		errs = append(errs, err)
	}
	if s.dead != nil {
		st := s.dead.check(s.rec)
		s.mu.Lock()
		s.deadStats = &st
		s.mu.Unlock()
	}
	err = errors.Join(errs...)
	s.mu.Lock()
	s.audited, s.auditErr = true, err
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("final checks", "err", err)
	}
	return err
}

// Run starts the workloads, waits for ctx to end, and stops them (Stop).
// A server restart does not end it: the workloads count their errors and
// go on once the server is back. If the server stays out of reach for
// longer than the lock timeout, Run stops early, without the final checks,
// and returns an error wrapping ErrServerGone.
func (s *Sim) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-s.gone:
	}
	err := s.Stop()
	if s.isGone() {
		return s.goneErr
	}
	return err
}

// Close stops the simulator if it runs, closes its pools and its live
// session, and removes its config file unless Options named one. It is safe
// to call more than once.
func (s *Sim) Close() error {
	err := s.Stop()
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if !closed {
		s.release()
	}
	return err
}
