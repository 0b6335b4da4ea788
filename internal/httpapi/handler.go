package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/locktop/locktop/internal/termsafe"
	"github.com/locktop/locktop/model"
)

// Deps are what the handler serves from. Snapshot is required; an endpoint
// whose dependency is nil answers 404.
type Deps struct {
	// Snapshot returns the lock table for /api/advisory-locks: Monitor.Poll,
	// or Latest.Snapshot to share a poll loop's snapshots.
	Snapshot SnapshotFunc
	// Info describes the server and what the monitor's role cannot see
	// (Monitor.Info); its Warning goes into the document. Optional.
	Info func() model.ServerInfo
	// Health is the check behind /healthz (Monitor.Probe): nil means
	// healthy, an error is the reason for a 503.
	Health func(ctx context.Context) error
	// Metrics serves /metrics (Metrics.Handler).
	Metrics http.Handler
	// Log receives failed requests; nil means slog.Default().
	Log *slog.Logger
}

// requestTimeout bounds the work behind one request.
const requestTimeout = 10 * time.Second

// New returns the handler of the three endpoints (and a small index at /).
// It panics if d.Snapshot is nil: that is a programming error.
func New(d Deps) http.Handler {
	if d.Snapshot == nil {
		panic("httpapi.New: Deps.Snapshot is nil")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	h := &handler{d: d}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /api/advisory-locks", h.locks)
	if d.Health != nil {
		mux.HandleFunc("GET /healthz", h.health)
	}
	if d.Metrics != nil {
		mux.Handle("GET /metrics", d.Metrics)
	}
	return mux
}

type handler struct{ d Deps }

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var b strings.Builder
	b.WriteString("locktop\n\n/api/advisory-locks  advisory locks held and waited for, as JSON\n")
	if h.d.Metrics != nil {
		b.WriteString("/metrics             Prometheus metrics\n")
	}
	if h.d.Health != nil {
		b.WriteString("/healthz             200 when a probe lock can be taken and released within 1s, else 503\n")
	}
	_, _ = w.Write([]byte(b.String()))
}

func (h *handler) locks(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	snap, err := h.d.Snapshot(ctx)
	if err != nil {
		if r.Context().Err() == nil {
			h.d.Log.Warn("GET /api/advisory-locks failed", "err", err)
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": oneLine(err.Error())})
		return
	}
	var info model.ServerInfo
	if h.d.Info != nil {
		info = h.d.Info()
	}
	writeJSON(w, http.StatusOK, NewDocument(snap, info))
}

// Health is the body of GET /healthz.
type Health struct {
	// Status is "ok" or "unavailable".
	Status string `json:"status"`
	// Reason says why, when unavailable.
	Reason string `json:"reason,omitempty"`
	// Took is how long the check took, in seconds.
	Took float64 `json:"took"`
}

func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	err := h.d.Health(r.Context())
	took := math.Round(time.Since(start).Seconds()*1e6) / 1e6
	if err != nil {
		if r.Context().Err() == nil {
			h.d.Log.Warn("health check failed", "reason", err.Error())
		}
		writeJSON(w, http.StatusServiceUnavailable, Health{Status: "unavailable", Reason: oneLine(err.Error()), Took: took})
		return
	}
	writeJSON(w, http.StatusOK, Health{Status: "ok", Took: took})
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
