package model

import "time"

// SimStatus is the simulator's state at one instant, for the dashboard's
// simulator panel and the headless report.
type SimStatus struct {
	Scenario     string
	Running      bool
	LocksEnabled bool
	SharedPool   bool
	Agents       int
	Started      time.Time
	// Rates are the scenario's knobs by name (e.g. "hooks/s": 200), as the
	// rate controls change them.
	Rates []Rate
	// Workers are the counters per worker kind ("hook", "reaper", ...).
	Workers map[string]Counters
	// Throughput is completed critical sections per second over the last
	// second or so.
	Throughput float64
	// Invariants and how often each has been broken so far.
	Invariants []Invariant
	// Pools are the simulator's connection pools ("lock" and "work", or
	// "shared").
	Pools []PoolStats
}

// Rate is one adjustable rate of a scenario.
type Rate struct {
	Name string
	// Value is per second; 0 means no limit (back to back).
	Value float64
}

// Invariant is one property the simulator checks, and its violations.
type Invariant struct {
	Name       string `json:"name"`
	Violations int64  `json:"violations"`
	// Last describes the most recent violation, if any.
	Last string `json:"last,omitempty"`
}

// OK reports whether no invariant has been broken.
func (s *SimStatus) OK() bool {
	for _, inv := range s.Invariants {
		if inv.Violations > 0 {
			return false
		}
	}
	return true
}
