package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/internal/record/history"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/ui"
)

// BenchmarkDashboardRefreshUnderFlood is the dashboard's refresh at 10,000
// held locks (poll + update + render, as in BenchmarkDashboardRefresh10k,
// and the write of the poll to the history, as --http's history keeps
// it), "quiet", and again while the same process's HTTP endpoints take
// BenchmarkHistoryFlood's load, "flood": 16 clients asking as fast as they
// can for a report over an hour of a two-hour history whose every minute
// holds those 10,000 locks. The history's requests are bounded (a slot, or
// 503 with Retry-After), so the flood may take the process's spare CPU but
// not the refresh's turn. The clients run in the process too, on the same
// cores, and read every answer (keep-alive), as Prometheus or curl do.
//
//	go test ./internal/cli -run '^$' -bench DashboardRefreshUnderFlood -benchtime 10x
func BenchmarkDashboardRefreshUnderFlood(b *testing.B) {
	ctx := context.Background()
	mon := monitor10k(b)
	hist := twoHours(b, mon)
	latest := httpapi.NewLatest(nil, time.Hour)
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Past: hist}))
	b.Cleanup(srv.Close)
	refresh := func(b *testing.B) {
		m := ui.New(ctx, ui.Options{Source: mon})
		m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
		for b.Loop() {
			snap, err := mon.Poll(ctx)
			if err == nil {
				err = hist.Write(0, snap) // as the dashboard's recorder does
			}
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
					_, _ = io.Copy(io.Discard, resp.Body)
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

// twoHours is a history in memory of two hours, a snapshot a minute, each
// mon's 10,000 held locks as it first polls them.
func twoHours(b *testing.B, mon *pgsource.Monitor) *history.History {
	snap, err := mon.Poll(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	now := t0
	h, err := history.New(history.Options{Keep: 3 * time.Hour, Now: func() time.Time { return now },
		Header: recording.Header{Sources: []string{"postgres"}, Start: t0, Interval: time.Minute}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close() })
	for i := range 121 {
		now = t0.Add(time.Duration(i) * time.Minute)
		snap.Taken = now
		if err := h.Write(0, snap); err != nil {
			b.Fatal(err)
		}
	}
	return h
}
