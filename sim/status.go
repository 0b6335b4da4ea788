// What the simulator shows: its events, pools, status and throughput.

package sim

import (
	"time"

	"github.com/locktop/locktop/internal/poolstats"
	"github.com/locktop/locktop/model"
)

// Events is the stream of what happens: acquires after a wait, skips (and
// who held the key), timeouts, refused reentrant acquires, phantom locks
// cleaned, lost locks, errors and broken invariants. The channel is
// buffered; when it is full, events are dropped (and counted) rather than
// slowing the workers. It is never closed.
func (s *Sim) Events() <-chan model.Event { return s.rec.events }

// Pools returns the simulator's pools: "lock" and "work", or "shared".
func (s *Sim) Pools() []model.PoolStats { return s.pools() }

func (s *Sim) pools() []model.PoolStats {
	if s.opts.SharedPool {
		return []model.PoolStats{poolstats.Of("shared", s.workPool, s.locks.Waiting()+s.db.Waiting())}
	}
	ps := []model.PoolStats{poolstats.Of("lock", s.locks.Pool(), s.locks.Waiting()), poolstats.Of("work", s.workPool, s.db.Waiting())}
	if s.leasePool != nil {
		ps = append(ps, poolstats.Of("lease", s.leasePool, 0))
	}
	return ps
}

// Status returns the simulator's state. It is cheap: counters are atomics
// and the throughput is worked out at most once a second.
func (s *Sim) Status() model.SimStatus {
	s.mu.Lock()
	st := model.SimStatus{
		Scenario:   s.sc.Name,
		Running:    s.run != nil && !s.run.stopping,
		SharedPool: s.opts.SharedPool,
		Agents:     s.sc.Agents,
		Started:    s.started,
	}
	for _, d := range s.sc.Drivers {
		st.Rates = append(st.Rates, model.Rate{Name: d.Name, Value: d.Rate})
	}
	s.mu.Unlock()
	st.LocksEnabled = s.env.Locking()
	st.Workers = s.rec.counters()
	st.Throughput = s.throughput()
	st.Invariants = s.rec.invariants()
	st.Pools = s.pools()
	return st
}

// throughput is completed critical sections per second, over the last
// second or so.
func (s *Sim) throughput() float64 {
	s.thrMu.Lock()
	defer s.thrMu.Unlock()
	now, n := time.Now(), s.rec.sections.Load()
	if s.thrAt.IsZero() {
		s.thrAt, s.thrN = now, n
		return 0
	}
	if dt := now.Sub(s.thrAt); dt >= time.Second {
		s.thrRate = float64(n-s.thrN) / dt.Seconds()
		s.thrAt, s.thrN = now, n
	}
	return s.thrRate
}
