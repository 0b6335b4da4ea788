package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/termsafe"
	"github.com/locktop/locktop/model"
)

// Deps are what the handler serves from. Latest or Snapshot is required;
// an endpoint whose dependency is nil answers 404.
type Deps struct {
	// Latest, when set, serves /api/advisory-locks from a poll loop's newest
	// snapshot (Latest.Serve): while the database hangs, the answer comes
	// within StaleWait, from the newest snapshot marked stale.
	Latest *Latest
	// Snapshot returns the lock table for /api/advisory-locks when Latest
	// is nil: Monitor.Poll, one poll per request.
	Snapshot SnapshotFunc
	// Info describes the server and what the monitor's role cannot see
	// (Monitor.Info); its Warning goes into the document. Optional.
	Info func() model.ServerInfo
	// Health is the check behind /healthz (Monitor.Probe): nil means
	// healthy, an error is the reason for a 503. Concurrent requests share
	// one check, and its result is reused for HealthMaxAge.
	Health func(ctx context.Context) error
	// Targets, when set (several targets), says how each target answers,
	// for /healthz's targets; a target down makes the status "degraded".
	Targets func() []TargetHealth
	// HealthMaxAge is how long a check's result answers /healthz: 0 means
	// DefaultHealthMaxAge, < 0 a check per request.
	HealthMaxAge time.Duration
	// Metrics serves /metrics (Metrics.Handler).
	Metrics http.Handler
	// Past, when set, answers /api/locks?at=, /api/report, /report and
	// /api/history from the history the process keeps (past.go).
	Past Past
	// Log receives failed requests; nil means slog.Default().
	Log *slog.Logger
	// Version is the locktop version the /report page names.
	Version string
	// QueryText is how much of each session's query text the documents
	// carry (querytext.Full, the zero value, is all of it).
	QueryText querytext.Mode
}

// requestTimeout bounds the work behind one request.
const requestTimeout = 10 * time.Second

// New returns the handler of the three endpoints (and a small index at /).
// It panics if both d.Latest and d.Snapshot are nil: that is a programming
// error.
func New(d Deps) http.Handler {
	if d.Latest == nil && d.Snapshot == nil {
		panic("httpapi.New: Deps.Latest and Deps.Snapshot are nil")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	h := &handler{d: d, past: newPastSlots()}
	if d.Health != nil {
		h.health = newHealthCache(d.Health, d.HealthMaxAge, d.Log)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /api/advisory-locks", h.locks)
	mux.HandleFunc("GET /api/locks", h.allLocks)
	mux.HandleFunc("GET /api/report", h.report)
	mux.HandleFunc("GET /report", h.reportPage)
	mux.HandleFunc("GET /api/history", h.historyFile)
	if d.Health != nil {
		mux.HandleFunc("GET /healthz", h.healthz)
	}
	if d.Metrics != nil {
		mux.Handle("GET /metrics", d.Metrics)
	}
	return mux
}

type handler struct {
	d      Deps
	past   *pastSlots // the past's requests running
	health *healthCache
}

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b strings.Builder
	b.WriteString("locktop\n\n/api/advisory-locks  advisory locks held and waited for, as JSON\n")
	b.WriteString("/api/locks           every kind of lock from every source (advisory, row, relation, Redis, lease), as JSON\n")
	if h.d.Past != nil {
		b.WriteString("/api/locks?at=TIME   the same as it was at TIME (RFC 3339, a time of day today, -5m), from the kept history\n")
		b.WriteString("/api/report          the incident review of the kept history as JSON (?from=TIME&to=TIME)\n")
		b.WriteString("/report              the same review as an HTML page with the lock timeline (?from=TIME&to=TIME)\n")
		b.WriteString("/api/history         the kept history as a recording (locktop replay/report http://HOST:PORT)\n")
	}
	if h.d.Metrics != nil {
		b.WriteString("/metrics             Prometheus metrics\n")
	}
	if h.d.Health != nil {
		b.WriteString("/healthz             200 when a probe lock can be taken and released within 1s, else 503\n")
	}
	_, _ = w.Write([]byte(b.String()))
}

func (h *handler) locks(w http.ResponseWriter, r *http.Request) {
	served, ok := h.serve(w, r, "/api/advisory-locks")
	if !ok {
		return
	}
	doc := NewDocument(served.Snapshot, h.info())
	doc.Age = seconds(served.Age)
	doc.Stale, doc.StaleReason = served.Stale, oneLine(served.Reason)
	if src := served.Sources; len(src) > 0 && src[0].Err != "" {
		// The other sources answered, PostgreSQL did not: its locks are
		// not in the snapshot.
		doc.Stale, doc.StaleReason = true, oneLine("the newest poll failed: "+src[0].Err)
	}
	writeJSON(w, http.StatusOK, doc)
}

// Health is the body of GET /healthz.
type Health struct {
	// Status is "ok" or "unavailable".
	Status string `json:"status"`
	// Reason says why, when unavailable.
	Reason string `json:"reason,omitempty"`
	// Took is how long the check took, in seconds.
	Took float64 `json:"took"`
	// Age is how long ago the check finished, in seconds: a result is
	// reused for HealthMaxAge (1 s by default), so no HTTP load becomes
	// database load.
	Age float64 `json:"age"`
	// Sources says how each source of the newest snapshot answered (the
	// PostgreSQL server's, a Redis, a lease table), when there are more
	// than one. A failing source other than PostgreSQL makes the status
	// "degraded" (still 200): the monitor works, that source's locks are
	// missing.
	Sources []SourceDoc `json:"sources,omitempty"`
	// Targets says how each target's server answered its newest poll,
	// when locktop watches several (Deps.Targets).
	Targets []TargetHealth `json:"targets,omitempty"`
}

// TargetHealth is one target's server in /healthz.
type TargetHealth struct {
	Name string `json:"name"`
	// Up: its newest poll answered.
	Up bool `json:"up"`
	// Fresh: it is up and its newest answer is no older than two intervals.
	Fresh bool `json:"fresh"`
	// Age is how long ago it last answered, in seconds (absent: never).
	Age float64 `json:"age,omitempty"`
	// Error is why its newest poll failed.
	Error string `json:"error,omitempty"`
}

func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	res, err := h.health.get(r.Context())
	if err == nil {
		err = res.err
	}
	hb := Health{Status: "ok", Took: seconds(res.took)}
	if !res.at.IsZero() {
		hb.Age = seconds(max(time.Since(res.at), 0))
	}
	if h.d.Targets != nil {
		hb.Targets = h.d.Targets()
		for i := range hb.Targets {
			t := &hb.Targets[i]
			t.Error = oneLine(t.Error)
			if !t.Up && hb.Status == "ok" {
				hb.Status, hb.Reason = "degraded", t.Name+": "+t.Error
			}
		}
	}
	if h.d.Latest != nil {
		if snap, ok := h.d.Latest.Newest(); ok && len(snap.Sources) > 1 {
			doc := NewLocksDocument(model.Snapshot{Sources: snap.Sources}, model.ServerInfo{})
			hb.Sources = doc.Sources
			for _, s := range doc.Sources[1:] {
				if !s.OK && hb.Status == "ok" {
					hb.Status, hb.Reason = "degraded", s.Name+": "+s.Error
				}
			}
		}
	}
	if err != nil {
		hb.Status, hb.Reason = "unavailable", oneLine(err.Error())
		writeJSON(w, http.StatusServiceUnavailable, hb)
		return
	}
	writeJSON(w, http.StatusOK, hb)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Every value written here marshals; this is a programming error.
		http.Error(w, fmt.Sprintf("encoding the response: %v", err), http.StatusInternalServerError)
		return
	}
	body = termsafe.EscapeJSON(body) // `curl` prints it to a terminal
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
