package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

func noSnapshot(context.Context) (model.Snapshot, error) { return model.Snapshot{}, nil }

// getHealth requests /healthz and decodes the answer.
func getHealth(t *testing.T, url string) (int, httpapi.Health) {
	t.Helper()
	code, _, body := get(t, url+"/healthz")
	var h httpapi.Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("/healthz: %d %s: %v", code, body, err)
	}
	return code, h
}

// Concurrent requests share one probe, and its result is reused for
// HealthMaxAge: HTTP load does not become database load.
func TestHealthProbeCoalescedAndCached(t *testing.T) {
	var probes atomic.Int32
	release := make(chan struct{})
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{
		Snapshot: noSnapshot,
		Health: func(context.Context) error {
			probes.Add(1)
			<-release
			return nil
		},
		HealthMaxAge: time.Hour,
	}))
	defer srv.Close()
	var wg sync.WaitGroup
	codes := make(chan int, 32)
	for range 32 {
		wg.Go(func() {
			code, _ := getHealth(t, srv.URL)
			codes <- code
		})
	}
	for probes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("status %d", code)
		}
	}
	for range 50 {
		if code, h := getHealth(t, srv.URL); code != http.StatusOK || h.Age < 0 {
			t.Fatalf("cached answer: %d %+v", code, h)
		}
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("%d probes for 82 requests within the cache time, want 1", n)
	}

	// Without the cache every request would probe: the cache is what holds
	// the count down.
	var uncached atomic.Int32
	srv2 := httptest.NewServer(httpapi.New(httpapi.Deps{
		Snapshot:     noSnapshot,
		Health:       func(context.Context) error { uncached.Add(1); return nil },
		HealthMaxAge: -1,
	}))
	defer srv2.Close()
	for range 5 {
		getHealth(t, srv2.URL)
	}
	if n := uncached.Load(); n != 5 {
		t.Errorf("HealthMaxAge < 0: %d probes for 5 requests", n)
	}
}

// 32 clients hammering /healthz of a real monitor run the probe's
// statements (a ping, the lock, the unlock) once per HealthMaxAge, not once
// per request.
func TestHealthProbeStatementsUnderLoad(t *testing.T) {
	mon := connect(t, pgtest.DSN(t))
	var probes atomic.Int32
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{
		Snapshot: mon.Poll,
		Health: func(ctx context.Context) error {
			probes.Add(1)
			return mon.Probe(ctx)
		},
	}))
	defer srv.Close()
	const clients, each = 32, 20
	var wg sync.WaitGroup
	var failed atomic.Int32
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for range each {
				if code, _ := getHealth(t, srv.URL); code != http.StatusOK {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// One probe per started HealthMaxAge at most, plus the first.
	limit := int32(elapsed/httpapi.DefaultHealthMaxAge) + 2
	if n := probes.Load(); n > limit {
		t.Errorf("%d probes (%d statements) for %d requests in %v, want at most %d", n, 3*n, clients*each, elapsed, limit)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d requests failed", n)
	}
	t.Logf("%d requests in %v: %d probes", clients*each, elapsed, probes.Load())
}
