package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
)

// BenchmarkHistoryFlood: 16 clients ask, as fast as they can, for a report
// over an hour of a two-hour history (one snapshot a minute) while one
// client reads /api/locks, as a dashboard's refresh would. It reports the
// flood's p99 and share of 503s, and /api/locks's p99 beside its p99 with
// no flood, so the cost of the flood to the live path shows as a ratio.
//
//	go test ./internal/serve/httpapi -run '^$' -bench HistoryFlood -benchtime 2000x
func BenchmarkHistoryFlood(b *testing.B) {
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(model.Snapshot{Taken: time.Now(), Locks: []model.Lock{{Kind: model.KindAdvisory, PID: 7, Namespace: "AGENT", EntityID: 1, Pair: true, Mode: model.ModeExclusive, Granted: true}}})
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Past: newFakePast(b)}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	get := func(url string) (time.Duration, int) {
		start := time.Now()
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return time.Since(start), resp.StatusCode
	}
	p99 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)*99/100]
	}
	live := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i], _ = get(srv.URL + "/api/locks")
		}
		return out
	}
	quiet := p99(live(200))

	b.ResetTimer()
	var mu sync.Mutex
	var flood []time.Duration
	busy := 0
	var wg sync.WaitGroup
	per := max(b.N/16, 1)
	for range 16 {
		wg.Go(func() {
			for range per {
				d, code := get(srv.URL + "/api/report?from=-100m&to=-40m")
				mu.Lock()
				flood = append(flood, d)
				if code == http.StatusServiceUnavailable {
					busy++
				}
				mu.Unlock()
			}
		})
	}
	loaded := p99(live(200))
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(p99(flood).Microseconds())/1000, "flood-p99-ms")
	b.ReportMetric(float64(busy)/float64(len(flood)), "flood-503-share")
	b.ReportMetric(float64(quiet.Microseconds())/1000, "locks-p99-quiet-ms")
	b.ReportMetric(float64(loaded.Microseconds())/1000, "locks-p99-flood-ms")
}
