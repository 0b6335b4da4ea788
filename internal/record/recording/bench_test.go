package recording

import (
	"fmt"
	"io"
	"testing"
	"time"
)

// countingWriter counts what is written and keeps none of it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

// BenchmarkSize records an hour of a server holding 1,000 advisory locks,
// one snapshot a second, unchanged and with 10% of the holders changing
// every second, and reports the file's size per hour (MB/h; budgets 10 and
// 100) and the time one snapshot takes to encode and write (ms/snapshot). Run it with -benchtime=1x: one iteration is one recorded hour.
func BenchmarkSize(b *testing.B) {
	for _, tc := range []struct {
		name     string
		changing float64
	}{{"unchanged", 0}, {"churn10pct", 0.1}} {
		b.Run(tc.name, func(b *testing.B) {
			var total int64
			var writing time.Duration
			for range b.N {
				s := newSynth(1000)
				var c countingWriter
				w, err := NewWriter(&c, Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				for range 3600 {
					snap := s.step(time.Second, tc.changing)
					start := time.Now()
					if err := w.Write(0, snap); err != nil {
						b.Fatal(err)
					}
					writing += time.Since(start)
				}
				w.Close()
				total += c.n
			}
			b.ReportMetric(float64(total)/float64(b.N)/1e6, "MB/h")
			b.ReportMetric(float64(writing.Microseconds())/1000/float64(3600*b.N), "ms/snapshot")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkWriteQueryText is the cost of one snapshot's write (1,000 held
// locks and their 100 waiters, 10% of holders changing) with each query
// text mode: normalized runs querytext.Normalize on every lock's text.
//
//	go test ./internal/record/recording -run '^$' -bench WriteQueryText
func BenchmarkWriteQueryText(b *testing.B) {
	for _, mode := range []string{"full", "normalized"} {
		b.Run(mode, func(b *testing.B) {
			s := newSynth(1000)
			for i := range s.locks {
				sess := *s.locks[i].Session()
				sess.Query = fmt.Sprintf("UPDATE jobs SET state = 'running', owner = 'w-%d' WHERE id = %d AND email = 'a@b.c' /* lease */", i%40, i%40)
				s.locks[i].Backend = &sess
			}
			w, err := NewWriter(&countingWriter{}, Header{Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, QueryText: mode})
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := w.Write(0, s.step(time.Second, 0.1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
