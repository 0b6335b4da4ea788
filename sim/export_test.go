package sim

import "github.com/locktop/locktop/workers"

// Env returns the workloads' environment, for tests that drive workloads by
// hand.
func (s *Sim) Env() *workers.Env { return s.env }
