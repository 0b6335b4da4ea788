package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/htmlreport"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
)

// GET /report is locktop report --html's page over the kept history,
// under /api/report's bounds: the span's cap, the kept range, the slots.
func TestReportPage(t *testing.T) {
	past := newFakePast(t)
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(model.Snapshot{Taken: time.Now()})
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Past: past, Version: "v1.2.3"}))
	defer srv.Close()

	if body := string(getBody(t, srv.URL+"/report", http.StatusBadRequest)); !strings.Contains(body, "at most 1h0m0s") {
		t.Errorf("a page of the whole two hours: %s; want the cap named", body)
	}
	if body := string(getBody(t, srv.URL+"/report?from=-5h", http.StatusBadRequest)); !strings.Contains(body, `"first"`) {
		t.Errorf("from before the kept range: %s; want the range named", body)
	}
	resp, err := http.Get(srv.URL + "/report?from=-50m&to=-20m")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := string(getBody(t, srv.URL+"/report?from=-50m&to=-20m", http.StatusOK))
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); csp != htmlreport.ContentSecurityPolicy {
		t.Errorf("Content-Security-Policy %q, want %q", csp, htmlreport.ContentSecurityPolicy)
	}
	for _, want := range []string{`<g class="lane k-advisory" id="lane-1">`, "AGENT 1", "locktop v1.2.3"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}

	// Busy: the page takes a slot of the past's requests like the others.
	past.gate, past.entered = make(chan struct{}), make(chan struct{}, httpapi.PastSlots())
	done := make(chan int, httpapi.PastSlots())
	for range httpapi.PastSlots() {
		go func() {
			r, err := http.Get(srv.URL + "/report?from=-50m&to=-20m")
			if err != nil {
				done <- 0
				return
			}
			r.Body.Close()
			done <- r.StatusCode
		}()
	}
	for range httpapi.PastSlots() {
		<-past.entered
	}
	busy, err := http.Get(srv.URL + "/report?from=-50m&to=-20m")
	if err != nil {
		t.Fatal(err)
	}
	busy.Body.Close()
	if busy.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a page beyond the %d held requests: %d, want 503", httpapi.PastSlots(), busy.StatusCode)
	}
	close(past.gate)
	for range httpapi.PastSlots() {
		if c := <-done; c != http.StatusOK {
			t.Errorf("a held page request ended %d, want 200", c)
		}
	}
}
