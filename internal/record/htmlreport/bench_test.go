package htmlreport

import (
	"bytes"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/testenv/headless"
	"github.com/locktop/locktop/model"
)

// hour records an hour of a server holding 1,000 advisory locks, one
// snapshot a second: key i changes hands every 5+i%11 seconds (a tenth of
// the holders change every second), and on every tenth key the next holder
// queues for the last 3 seconds before it is granted.
// hourSecs is the length of hour, in seconds.
var hourSecs = 3600

func hour(tb testing.TB) *recording.Recording {
	tb.Helper()
	const keys = 1000
	secs := hourSecs
	var buf bytes.Buffer
	w, err := recording.NewWriter(&buf, recording.Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	locks := make([]model.Lock, 0, keys+keys/10)
	for sec := range secs {
		t := t0.Add(time.Duration(sec) * time.Second)
		locks = locks[:0]
		for i := range keys {
			period := 5 + i%11
			turn := sec / period
			pid := func(turn int) int32 { return int32(10000 + i*7 + turn%50) }
			l := model.Lock{Kind: model.KindAdvisory, PID: pid(turn), Database: "app", Mode: model.ModeExclusive,
				Granted: true, Namespace: "AGENT", EntityID: int64(i), Pair: true, HeldSince: t0.Add(time.Duration(turn*period) * time.Second),
				Backend: &model.Backend{ApplicationName: "worker", Query: "SELECT pg_advisory_lock(1, $1)"}}
			locks = append(locks, l)
			if i%10 == 0 && sec%period >= period-3 {
				next := t0.Add(time.Duration((turn+1)*period-3) * time.Second)
				locks = append(locks, model.Lock{Kind: model.KindAdvisory, PID: pid(turn + 1), Database: "app", Backend: &model.Backend{ApplicationName: "worker", Query: "SELECT pg_advisory_lock(1, $1)"},
					Mode: model.ModeExclusive, Namespace: "AGENT", EntityID: int64(i), Pair: true, WaitStart: next, BlockedBy: []int32{l.PID},
				})
			}
		}
		if err := w.Write(0, model.Snapshot{Taken: t, Locks: locks}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	r, err := recording.Read(buf.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// BenchmarkHourReport renders the report of an hour of 1,000 held locks
// (hour) as the HTML page, and opens it in headless Chromium: MB is the
// page's size (budget 5), s/render the time from the recording to the
// page's bytes (the review, the lanes and the template), ms/load the time
// Chromium takes from navigation to its first frame after load (budget
// 2,000). Run it with -benchtime=1x.
func BenchmarkHourReport(b *testing.B) {
	r := hour(b)
	var page []byte
	var render time.Duration
	for range b.N {
		start := time.Now()
		rep, tl, err := Review(r, r.Header.Server, time.Time{}, time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		var out bytes.Buffer
		if err := Write(&out, rep, tl, Options{Sources: r.Header.Sources, Version: "bench"}); err != nil {
			b.Fatal(err)
		}
		render += time.Since(start)
		page = out.Bytes()
	}
	b.StopTimer()
	br := headless.New(b)
	load := br.Open(b, b.TempDir(), "hour.html", page)
	if errs := br.Errors(); len(errs) > 0 {
		b.Fatalf("the page reported errors: %v", errs)
	}
	lanes := headless.Eval[int](b, br, `document.querySelectorAll("g.lane").length`)
	if lanes != MaxLanes+1 {
		b.Fatalf("%d lanes, want %d and the band of the rest", lanes, MaxLanes)
	}
	b.ReportMetric(float64(len(page))/1e6, "MB")
	b.ReportMetric(render.Seconds()/float64(b.N), "s/render")
	b.ReportMetric(float64(load.Milliseconds()), "ms/load")
	b.ReportMetric(0, "ns/op")
}
