package recording

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/locktop/locktop/model"
)

// t0 is the synthetic recordings' start.
var t0 = time.Date(2026, 1, 15, 3, 0, 0, 0, time.UTC)

// synth is a server holding n advisory locks, as the monitor reads them: a
// holder per key, idle in its transaction after taking the lock, and a
// waiter behind every tenth. Each step a fraction of the keys changes
// hands: the holder releases and a new backend takes the key.
type synth struct {
	rng   *rand.Rand
	locks []model.Lock
	taken time.Time
	pid   int32
}

func newSynth(n int) *synth {
	s := &synth{rng: rand.New(rand.NewPCG(1, 2)), taken: t0, pid: 1000}
	for i := range n {
		s.locks = append(s.locks, s.holder(int64(i), t0.Add(-time.Minute)))
		if i%10 == 0 {
			w := s.holder(int64(i), t0.Add(-time.Second))
			w.Granted, w.HeldSince, w.QueuePos = false, time.Time{}, 1
			w.OwnBackend().State, w.WaitStart = "active", w.Session().QueryStart
			w.BlockedBy = []int32{s.locks[len(s.locks)-1].PID}
			s.locks = append(s.locks, w)
		}
	}
	return s
}

func (s *synth) holder(id int64, at time.Time) model.Lock {
	s.pid++
	return model.Lock{
		Kind: model.KindAdvisory, PID: s.pid, Database: "app", Backend: &model.Backend{User: "app", ApplicationName: "locktop.lock", ClientAddr: fmt.Sprintf("10.0.%d.%d", s.pid/256%256, s.pid%256), State: "idle in transaction", Query: "SELECT pg_advisory_lock($1, $2)", QueryStart: at, StateChange: at.Add(300 * time.Microsecond)},

		Mode: model.ModeExclusive, Granted: true, Namespace: "AGENT", EntityID: id, Pair: true,
		HeldSince: at.Add(300 * time.Microsecond),
	}
}

// step advances the clock by d, hands over changing×holders keys, and
// returns the snapshot as the monitor would: durations as of Taken.
func (s *synth) step(d time.Duration, changing float64) model.Snapshot {
	s.taken = s.taken.Add(d)
	for i := range s.locks {
		if s.locks[i].Granted && s.rng.Float64() < changing {
			s.locks[i] = s.holder(s.locks[i].EntityID, s.taken.Add(-d/2))
		}
	}
	out := model.Snapshot{Taken: s.taken, Connections: len(s.locks) + 3, Latency: 1234 * time.Microsecond, Interval: d}
	out.Locks = make([]model.Lock, len(s.locks))
	for i, l := range s.locks {
		l.BlockedBy = append([]int32(nil), l.BlockedBy...)
		out.Locks[i] = l
	}
	return out
}
