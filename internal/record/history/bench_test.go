package history

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// server is a synthetic server holding n advisory locks, each held by a
// session idle in its transaction; each second a fraction of the keys
// changes hands.
type server struct {
	rng   *rand.Rand
	locks []model.Lock
	taken time.Time
	pid   int32
}

func newServer(n int) *server {
	s := &server{rng: rand.New(rand.NewPCG(1, 2)), taken: t0, pid: 1000}
	for i := range n {
		s.locks = append(s.locks, s.holder(int64(i), t0.Add(-time.Minute)))
	}
	return s
}

func (s *server) holder(id int64, at time.Time) model.Lock {
	s.pid++
	return model.Lock{
		Kind: model.KindAdvisory, PID: s.pid, Database: "app", Backend: &model.Backend{User: "app", ApplicationName: "locktop.lock",
			ClientAddr: fmt.Sprintf("10.0.%d.%d", s.pid/256%256, s.pid%256), State: "idle in transaction", Query: "SELECT pg_advisory_lock($1, $2)", QueryStart: at, StateChange: at.Add(300 * time.Microsecond)},
		Mode: model.ModeExclusive, Granted: true, Namespace: "AGENT", EntityID: id, Pair: true, HeldSince: at.Add(300 * time.Microsecond),
	}
}

func (s *server) step(changing float64) model.Snapshot {
	s.taken = s.taken.Add(time.Second)
	for i := range s.locks {
		if s.rng.Float64() < changing {
			s.locks[i] = s.holder(s.locks[i].EntityID, s.taken.Add(-time.Second/2))
		}
	}
	return model.Snapshot{Taken: s.taken, Connections: len(s.locks) + 3, Latency: time.Millisecond, Interval: time.Second, Locks: append([]model.Lock(nil), s.locks...)}
}

// BenchmarkHistory keeps the history of a server holding 1,000 advisory
// locks, a snapshot a second, unchanged and with 10% of the holders
// changing every second, and reports the bytes an hour of it takes (MB/h:
// a quarter of an hour, times four; bounds large enough to keep it all), and what the history holds with
// the default bounds after 30 minutes: its bytes (MB-kept) and the heap it
// adds (MB-heap). Run it with -benchtime=1x.
func BenchmarkHistory(b *testing.B) {
	for _, tc := range []struct {
		name     string
		changing float64
	}{{"unchanged", 0}, {"churn10pct", 0.1}} {
		b.Run(tc.name, func(b *testing.B) {
			var hour, kept, heap float64
			for range b.N {
				// A quarter of an hour (seven keyframe cycles), times four.
				hour += 4 * float64(fill(b, 900, tc.changing, Options{Keep: 2 * time.Hour, MaxBytes: 1 << 30}, nil)) / 1e6
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				kept += float64(fill(b, 1800, tc.changing, Options{}, func() {
					runtime.GC()
					runtime.ReadMemStats(&after)
				})) / 1e6
				heap += float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / 1e6
			}
			n := float64(b.N)
			b.ReportMetric(hour/n, "MB/h")
			b.ReportMetric(kept/n, "MB-kept")
			b.ReportMetric(heap/n, "MB-heap")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// fill writes steps snapshots to a history in memory with options o (on a
// clock that moves a second a snapshot), calls done while it still holds
// them, and returns its size.
func fill(b *testing.B, steps int, changing float64, o Options, done func()) int64 {
	c := &clock{t0}
	o.Header, o.Now = header(), c.now
	h, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	s := newServer(1000)
	for i := range steps {
		c.t = t0.Add(time.Duration(i) * time.Second)
		if err := h.Write(0, s.step(changing)); err != nil {
			b.Fatal(err)
		}
	}
	if done != nil {
		done()
	}
	size := h.Size()
	h.Close()
	return size
}
