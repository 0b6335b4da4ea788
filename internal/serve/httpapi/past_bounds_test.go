package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
)

// fakePast is a kept history of two hours, one snapshot a minute; when
// gate is not nil, Recording waits for it (a slow read of the history).
type fakePast struct {
	data    []byte
	gate    chan struct{}
	entered chan struct{} // a request began reading the history
	mu      sync.Mutex
	reads   []time.Time // when each request began reading it
}

func newFakePast(t testing.TB) *fakePast {
	t.Helper()
	var buf bytes.Buffer
	t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	w, err := recording.NewWriter(&buf, recording.Header{Sources: []string{"postgres"}, Start: t0, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 121 {
		at := t0.Add(time.Duration(i) * time.Minute)
		s := model.Snapshot{Taken: at, Locks: []model.Lock{{Kind: model.KindAdvisory, PID: 7, Namespace: "AGENT", EntityID: 1, Pair: true, Mode: model.ModeExclusive, Granted: true, HeldSince: t0}}}
		if err := w.Write(0, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return &fakePast{data: buf.Bytes()}
}

func (p *fakePast) Recording() (*recording.Recording, error) {
	p.mu.Lock()
	p.reads = append(p.reads, time.Now())
	p.mu.Unlock()
	if p.gate != nil {
		p.entered <- struct{}{}
		<-p.gate
	}
	return recording.Read(p.data)
}

func (p *fakePast) Bytes() ([]byte, error) { return p.data, nil }

// A report spans at most MaxReportSpan: a wider range is a 400 that names
// the cap, a narrower one is answered.
func TestReportSpanCapped(t *testing.T) {
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(model.Snapshot{Taken: time.Now()})
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Past: newFakePast(t)}))
	defer srv.Close()
	body := string(getBody(t, srv.URL+"/api/report", http.StatusBadRequest))
	if !strings.Contains(body, "at most 1h0m0s") {
		t.Errorf("a report of the whole two hours: %s; want the cap named", body)
	}
	getBody(t, srv.URL+"/api/report?from=-50m&to=-20m", http.StatusOK)
}

// More than PastSlots() requests of the history at once: the rest wait
// PastWait (parked, taking no CPU), then get 503 with Retry-After.
func TestPastRequestsBounded(t *testing.T) {
	past := newFakePast(t)
	past.gate, past.entered = make(chan struct{}), make(chan struct{}, httpapi.PastSlots())
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(model.Snapshot{Taken: time.Now()})
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Past: past}))
	defer srv.Close()
	var wg sync.WaitGroup
	codes := make(chan int, httpapi.PastSlots())
	for range httpapi.PastSlots() {
		wg.Go(func() {
			resp, err := http.Get(srv.URL + "/api/locks?at=-30m")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	for range httpapi.PastSlots() {
		<-past.entered
	}
	resp, err := http.Get(srv.URL + "/api/report?from=-50m&to=-20m")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a request beyond the %d held ones: %d, want 503 with Retry-After", httpapi.PastSlots(), resp.StatusCode)
	}
	close(past.gate)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a held request ended %d, want 200", c)
		}
	}
}

// The past's requests are paced: after one that worked for d, the next
// begins its work no sooner than d after the first ended, so that a flood
// takes at most half a slot's CPU.
func TestPastRequestsPaced(t *testing.T) {
	past := newFakePast(t)
	past.gate, past.entered = make(chan struct{}), make(chan struct{}, 2)
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(model.Snapshot{Taken: time.Now()})
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Past: past}))
	defer srv.Close()
	first := make(chan struct{})
	go func() { defer close(first); getBody(t, srv.URL+"/api/locks?at=-30m", http.StatusOK) }()
	<-past.entered
	time.Sleep(200 * time.Millisecond) // the first request's work
	released := time.Now()
	close(past.gate)
	<-first
	getBody(t, srv.URL+"/api/locks?at=-30m", http.StatusOK)
	past.mu.Lock()
	defer past.mu.Unlock()
	if want := released.Add(released.Sub(past.reads[0])); past.reads[1].Before(want) {
		t.Errorf("the second request began its work %s after the first ended, want at least %s", past.reads[1].Sub(released), released.Sub(past.reads[0]))
	}
}
