package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// BenchmarkDashboardRefreshUnderFlood is the dashboard's refresh at 10,000
// held locks (poll + update + render, as in BenchmarkDashboardRefresh10k),
// "quiet", and again while the same process's HTTP endpoints take
// BenchmarkHistoryFlood's load, "flood": 16 clients asking as fast as they
// can for a report over an hour of a two-hour history. The history's
// requests run at most two at once (the others get 503 with Retry-After),
// so the flood may take the process's spare CPU but not the refresh's
// turn. The clients run in the process too, on the same two cores.
//
//	go test ./internal/cli -run '^$' -bench DashboardRefreshUnderFlood -benchtime 20x
func BenchmarkDashboardRefreshUnderFlood(b *testing.B) {
	ctx := context.Background()
	mon := monitor10k(b)
	latest := httpapi.NewLatest(nil, time.Hour)
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Past: twoHours(b)}))
	b.Cleanup(srv.Close)
	refresh := func(b *testing.B) {
		m := ui.New(ctx, ui.Options{Source: mon})
		m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
		for b.Loop() {
			snap, err := mon.Poll(ctx)
			latest.Put(snap) // as the dashboard's --http publishes each poll
			m.Update(ui.SnapshotMsg{Snapshot: snap, Err: err})
			_ = m.View()
		}
	}
	b.Run("quiet", refresh)
	b.Run("flood", func(b *testing.B) {
		fctx, stop := context.WithCancel(ctx)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
		var answered, busy atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for fctx.Err() == nil {
					req, _ := http.NewRequestWithContext(fctx, http.MethodGet, srv.URL+"/api/report?from=-100m&to=-40m", nil)
					resp, err := client.Do(req)
					if err != nil {
						continue // the context ended
					}
					resp.Body.Close()
					answered.Add(1)
					if resp.StatusCode == http.StatusServiceUnavailable {
						busy.Add(1)
					}
				}
			})
		}
		// The flood runs before the first refresh is timed.
		for answered.Load() < 32 {
			time.Sleep(time.Millisecond)
		}
		start, before := time.Now(), answered.Load()
		refresh(b)
		n, took := answered.Load()-before, time.Since(start)
		stop()
		wg.Wait()
		client.CloseIdleConnections()
		b.ReportMetric(float64(n)/took.Seconds(), "flood-req/s")
		if n > 0 {
			b.ReportMetric(float64(busy.Load())/float64(answered.Load()), "flood-503-share")
		}
	})
}

// twoHoursPast is a history of two hours, a snapshot a minute, as
// BenchmarkHistoryFlood's.
type twoHoursPast struct{ data []byte }

func twoHours(b *testing.B) *twoHoursPast {
	var buf bytes.Buffer
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	w, err := recording.NewWriter(&buf, recording.Header{Sources: []string{"postgres"}, Start: t0, Interval: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 121 {
		s := model.Snapshot{Taken: t0.Add(time.Duration(i) * time.Minute), Locks: []model.Lock{{Kind: model.KindAdvisory, PID: 7,
			Namespace: "AGENT", EntityID: 1, Pair: true, Mode: model.ModeExclusive, Granted: true, HeldSince: t0}}}
		if err := w.Write(0, s); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return &twoHoursPast{data: buf.Bytes()}
}

func (p *twoHoursPast) Recording() (*recording.Recording, error) { return recording.Read(p.data) }
func (p *twoHoursPast) Bytes() ([]byte, error)                   { return p.data, nil }
