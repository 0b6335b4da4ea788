package sim

import "github.com/locktop/locktop/workers"

// Env returns the workloads' environment, for tests that drive workloads by
// hand.
func (s *Sim) Env() *workers.Env { return s.env }

// DeadlockPolls is how many polls the deadlock watch has made in this run.
func (s *Sim) DeadlockPolls() int {
	s.mu.Lock()
	d := s.dead
	s.mu.Unlock()
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.polls)
}
