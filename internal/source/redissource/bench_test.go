package redissource_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/benchcpu"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// BenchmarkPoll is the one-pane Redis figure in miniature (cmd/benchreport's
// "one pane" step): the source's Poll of 1,000 held session mutexes beside
// its bare read (redislocks.BareRead: the same commands, decoded by go-redis
// and dropped) and beside a bare SCAN loop of the prefix. Compare them in
// one run (-count 5); profile poll with -cpuprofile. Each reports the CPU
// this process spent per op (cpu-ms/op: go-redis, decoding, the
// source's own work and the GC, less noisy than the wall time on a shared
// machine) and Redis's (server-µs/op).
func BenchmarkPoll(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Client(b)
	prefix := redistest.Prefix(b)
	l := redislock.New(rdb, redislock.Options{Prefix: prefix, TTL: 10 * time.Minute, Owner: "bench"})
	defer l.Close()
	for i := range 1000 {
		if _, err := l.TryAcquire(ctx, "bench:"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	src := redissource.New(redistest.Client(b), redissource.Options{Prefix: prefix})
	b.Run("poll", func(b *testing.B) {
		defer benchcpu.PerOp(b)()
		defer redistest.ServerCPU(b, rdb)()
		for b.Loop() {
			if snap, err := src.Poll(ctx); err != nil || len(snap.Locks) != 1000 {
				b.Fatalf("%d locks, %v", len(snap.Locks), err)
			}
		}
	})
	b.Run("bare-read", func(b *testing.B) {
		defer benchcpu.PerOp(b)()
		defer redistest.ServerCPU(b, rdb)()
		for b.Loop() {
			if n, err := redislocks.BareRead(ctx, rdb, prefix); err != nil || n != 1000 {
				b.Fatalf("%d holds, %v", n, err)
			}
		}
	})
	bareScan := func(b *testing.B) {
		var cursor uint64
		for {
			_, next, err := rdb.Scan(ctx, cursor, prefix+"*", 1000).Result()
			if err != nil {
				b.Fatal(err)
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	b.Run("bare-scan", func(b *testing.B) {
		defer benchcpu.PerOp(b)()
		defer redistest.ServerCPU(b, rdb)()
		for b.Loop() {
			bareScan(b)
		}
	})
	// Side by side: each iteration runs the three, so a machine busy with
	// other work slows them alike; the medians and their ratios are reported.
	b.Run("ratio", func(b *testing.B) {
		var poll, bare, scan []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if snap, err := src.Poll(ctx); err != nil || len(snap.Locks) != 1000 {
				b.Fatalf("%d locks, %v", len(snap.Locks), err)
			}
			t1 := time.Now()
			if n, err := redislocks.BareRead(ctx, rdb, prefix); err != nil || n != 1000 {
				b.Fatalf("%d holds, %v", n, err)
			}
			t2 := time.Now()
			bareScan(b)
			poll, bare, scan = append(poll, t1.Sub(t0)), append(bare, t2.Sub(t1)), append(scan, time.Since(t2))
		}
		med := func(d []time.Duration) float64 { slices.Sort(d); return float64(d[len(d)/2]) }
		b.ReportMetric(med(poll)/1e6, "poll-ms")
		b.ReportMetric(med(bare)/1e6, "bare-read-ms")
		b.ReportMetric(med(scan)/1e6, "bare-scan-ms")
		b.ReportMetric(med(poll)/med(bare), "x-bare-read")
		b.ReportMetric(med(poll)/med(scan), "x-bare-scan")
	})
}
