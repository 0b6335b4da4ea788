package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/poolstats"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/serve/metrics"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, dsn string) *pgsource.Monitor {
	t.Helper()
	m, err := pgsource.Connect(context.Background(), dsn, pgsource.Options{})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// server serves the handler over a monitor, with metrics, on a test server.
func server(t *testing.T, mon *pgsource.Monitor, met *metrics.Metrics) *httptest.Server {
	t.Helper()
	if met == nil {
		met = metrics.New()
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{
		Snapshot: mon.Poll,
		Info:     mon.Info,
		Health:   mon.Probe,
		Metrics:  met.Handler(),
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// hold takes pg_advisory_lock(space, id) on a connection of its own with a
// marker in the statement's text, and returns the connection and its pid.
func hold(t *testing.T, dsn string, space, id int32, marker string) (*pgx.Conn, int32) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1::int4, $2::int4) /* "+marker+" */", space, id); err != nil {
		t.Fatal(err)
	}
	return c, int32(c.PgConn().PID())
}

// wait starts pg_advisory_lock(space, id) on a connection of its own; the
// wait ends when the test does.
func wait(t *testing.T, space, id int32) int32 {
	t.Helper()
	c := pgtest.Conn(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Exec(ctx, "SELECT pg_advisory_lock($1::int4, $2::int4)", space, id)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return int32(c.PgConn().PID())
}

// pollUntil polls the monitor until cond holds of the snapshot.
func pollUntil(t *testing.T, mon *pgsource.Monitor, what string, cond func(model.Snapshot) bool) model.Snapshot {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := mon.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waiters(key string) func(model.Snapshot) bool {
	return func(s model.Snapshot) bool {
		for _, l := range s.Locks {
			if l.KeyLabel() == key && !l.Granted {
				return true
			}
		}
		return false
	}
}

// The document has every field the seed and the issue name, with seconds as
// numbers, blocked_by as a list (never null) and total equal to the rows.
func TestAdvisoryLocksDocument(t *testing.T) {
	dsn := pgtest.DSN(t)
	mon := connect(t, dsn)
	srv := server(t, mon, nil)
	_, holder := hold(t, dsn, 1, 5150, "doc-holder")
	waiter := wait(t, 1, 5150)
	pollUntil(t, mon, "the waiter", waiters("AGENT 5150"))

	code, hdr, body := get(t, srv.URL+"/api/advisory-locks")
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q: %s", code, hdr.Get("Content-Type"), body)
	}
	var raw struct {
		Total int              `json:"total"`
		Locks []map[string]any `json:"locks"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Total != len(raw.Locks) || raw.Total < 2 {
		t.Errorf("total %d, %d rows", raw.Total, len(raw.Locks))
	}
	fields := []string{"pid", "application_name", "state", "query_start", "namespace", "entity_id", "mode", "granted", "duration",
		"database", "wait_start", "waited", "blocked_by", "query", "kind", "key", "holder", "held", "queue_position"}
	var sawHolder, sawWaiter bool
	for _, row := range raw.Locks {
		for _, f := range fields {
			if _, ok := row[f]; !ok {
				t.Errorf("row %v lacks %q", row["key"], f)
			}
		}
		for _, f := range []string{"duration", "waited", "held"} {
			if _, ok := row[f].(float64); !ok {
				t.Errorf("%s is %T, want a number of seconds", f, row[f])
			}
		}
		if _, ok := row["blocked_by"].([]any); !ok {
			t.Errorf("blocked_by is %T (%v), want a list", row["blocked_by"], row["blocked_by"])
		}
		if row["key"] != "AGENT 5150" {
			continue
		}
		if row["namespace"] != "AGENT" || row["entity_id"] != 5150.0 || row["kind"] != "advisory" || row["mode"] != "ExclusiveLock" {
			t.Errorf("row %v", row)
		}
		switch row["pid"] {
		case float64(holder):
			sawHolder = true
			if row["granted"] != true || row["wait_start"] != nil || len(row["blocked_by"].([]any)) != 0 ||
				!strings.Contains(row["query"].(string), "doc-holder") || row["query_start"] == nil || row["duration"].(float64) <= 0 {
				t.Errorf("holder row %v", row)
			}
		case float64(waiter):
			sawWaiter = true
			bb := row["blocked_by"].([]any)
			if row["granted"] != false || row["wait_start"] == nil || len(bb) != 1 || bb[0] != float64(holder) ||
				row["queue_position"] != 1.0 || row["waited"].(float64) < 0 || row["duration"].(float64) < row["waited"].(float64) {
				t.Errorf("waiter row %v", row)
			}
		}
	}
	if !sawHolder || !sawWaiter {
		t.Errorf("holder seen %v, waiter seen %v in %s", sawHolder, sawWaiter, body)
	}

	// The typed document decodes the same body.
	var doc httpapi.Document
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Held+doc.Waiting != doc.Total || doc.Taken.IsZero() || doc.Warning != "" || doc.Connections < 3 {
		t.Errorf("document header: total %d held %d waiting %d taken %v connections %d warning %q",
			doc.Total, doc.Held, doc.Waiting, doc.Taken, doc.Connections, doc.Warning)
	}
}

// seed 000's document holds advisory locks only: a lease row of the same
// snapshot is left out (GET /api/locks has it); blocked_by is [] even when
// the snapshot has nil.
func TestDocumentAdvisoryOnly(t *testing.T) {
	taken := time.Unix(1_800_000_000, 0)
	doc := httpapi.NewDocument(model.Snapshot{Taken: taken, Locks: []model.Lock{
		{Kind: model.KindLease, Name: "map:m1", Owner: "worker-1", Mode: "write", Granted: true, HeldSince: taken.Add(-1500 * time.Millisecond), Expires: taken.Add(20 * time.Second)},
		{Kind: model.KindAdvisory, Namespace: "", EntityID: -42, Granted: true},
	}}, model.ServerInfo{Warning: "no pg_monitor"})
	body, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Warning string           `json:"warning"`
		Total   int              `json:"total"`
		Held    int              `json:"held"`
		Locks   []map[string]any `json:"locks"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if raw.Total != 1 || raw.Held != 1 || len(raw.Locks) != 1 {
		t.Fatalf("document %s: want the advisory lock alone", body)
	}
	bigint := raw.Locks[0]
	if bb, ok := bigint["blocked_by"].([]any); !ok || len(bb) != 0 {
		t.Errorf("blocked_by = %v, want []", bigint["blocked_by"])
	}
	if bigint["key"] != "-42" || bigint["namespace"] != "" || bigint["kind"] != "advisory" {
		t.Errorf("bigint row %v", bigint)
	}
	for _, f := range []string{"lease_left", "owner"} {
		if _, ok := bigint[f]; ok {
			t.Errorf("an advisory lock has %s", f)
		}
	}
	if raw.Warning != "no pg_monitor" {
		t.Errorf("warning %q", raw.Warning)
	}
}

// /metrics serves the lock-event counters and the snapshot gauges, with
// their values.
func TestMetricsEndpoint(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	mon := connect(t, dsn)
	met := metrics.New()
	met.AddPools(func() []model.PoolStats { return []model.PoolStats{poolstats.Of("monitor", mon.Pool(), 0)} })
	srv := server(t, mon, met)

	locks := lockcore.New(pgtest.Pool(t, nil), lockcore.Observe(met.Observer()))
	if err := locks.With(ctx, lockcore.Pair(registry.SpaceAgent, 61), func(ctx context.Context) error {
		ok, err := locks.TryWith(ctx, lockcore.Pair(registry.SpaceAgent, 61), func(context.Context) error { return nil })
		if ok || err != nil {
			t.Errorf("reentrant TryWith: %v, %v", ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hold(t, dsn, 1, 62, "metrics")
	wait(t, 1, 62)
	met.Snapshot(pollUntil(t, mon, "the waiter", waiters("AGENT 62")))

	code, hdr, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("status %d, content type %q", code, hdr.Get("Content-Type"))
	}
	text := string(body)
	for _, want := range []string{
		`locktop_lock_attempts_total{acquire="blocking",namespace="AGENT"} 1`,
		`locktop_lock_acquired_total{acquire="blocking",namespace="AGENT"} 1`,
		`locktop_lock_reentrant_refusals_total{namespace="AGENT"} 1`,
		`locktop_lock_wait_seconds_count{acquire="blocking",namespace="AGENT"} 1`,
		`locktop_lock_hold_seconds_count{namespace="AGENT"} 1`,
		`locktop_lock_held{namespace="AGENT"} 0`,
		`locktop_snapshot_locks_waiting{database=`,
		`locktop_pool_max_connections{pool="monitor"} 2`,
		`locktop_monitor_poll_errors_total 0`,
		`go_goroutines `,
		`process_cpu_seconds_total `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(text, `namespace="AGENT"} 1`) || !strings.Contains(text, "locktop_snapshot_locks_held{") {
		t.Errorf("no snapshot gauges:\n%s", grep(text, "locktop_snapshot"))
	}
}

func grep(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestHealthz(t *testing.T) {
	ctx := context.Background()
	mon := connect(t, pgtest.DSN(t))
	srv := server(t, mon, nil)
	code, _, body := get(t, srv.URL+"/healthz")
	var h httpapi.Health
	if err := json.Unmarshal(body, &h); err != nil || code != http.StatusOK || h.Status != "ok" {
		t.Fatalf("healthy: %d %s (%v)", code, body, err)
	}

	// Another session holds the probe lock: 503, and the reason, once the
	// last result has aged out (results are reused for a second).
	other := pgtest.Conn(t)
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1::int8)", registry.HealthProbeID); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "a 503 with the probe lock held elsewhere", func() bool {
		code, _, body = get(t, srv.URL+"/healthz")
		return code != http.StatusOK
	})
	h = httpapi.Health{}
	if err := json.Unmarshal(body, &h); err != nil || code != http.StatusServiceUnavailable || h.Status != "unavailable" ||
		!strings.Contains(h.Reason, "LOCKTOP_HEALTH not granted within 1s") {
		t.Errorf("probe lock held elsewhere: %d %s (%v)", code, body, err)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1::int8)", registry.HealthProbeID); err != nil {
		t.Fatal(err)
	}

	// The database goes away: 503 with a reason, and /api/advisory-locks
	// says what went wrong too.
	mon.Close()
	pgtest.Eventually(t, "a 503 from a closed monitor", func() bool {
		code, _, body = get(t, srv.URL+"/healthz")
		h = httpapi.Health{}
		return json.Unmarshal(body, &h) == nil && h.Reason != "" && !strings.Contains(h.Reason, "LOCKTOP_HEALTH")
	})
	if err := json.Unmarshal(body, &h); err != nil || code != http.StatusServiceUnavailable || h.Reason == "" {
		t.Errorf("closed monitor: %d %s (%v)", code, body, err)
	}
	code, _, body = get(t, srv.URL+"/api/advisory-locks")
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"error"`) {
		t.Errorf("lock table of a closed monitor: %d %s", code, body)
	}
}

// A role with only pg_monitor sees other roles' queries; a role without it
// gets the lock table all the same, with a warning that names what is
// missing, and a health check that passes.
func TestPrivileges(t *testing.T) {
	dsn := pgtest.DSN(t)
	_, pid := hold(t, dsn, 1, 7070, "secret-marker-7070")
	rowOf := func(srv *httptest.Server) (httpapi.Document, httpapi.Lock) {
		t.Helper()
		code, _, body := get(t, srv.URL+"/api/advisory-locks")
		if code != http.StatusOK {
			t.Fatalf("status %d: %s", code, body)
		}
		var doc httpapi.Document
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		for _, l := range doc.Locks {
			if l.PID != nil && *l.PID == pid {
				return doc, l
			}
		}
		t.Fatalf("no row of pid %d in %s", pid, body)
		return doc, httpapi.Lock{}
	}

	mon := connect(t, pgtest.Role(t, "api_monitor", "pw-monitor", "pg_monitor"))
	doc, row := rowOf(server(t, mon, nil))
	if doc.Warning != "" || !strings.Contains(row.Query, "secret-marker-7070") || row.State == "" || row.QueryStart == nil {
		t.Errorf("pg_monitor role: warning %q, row %+v", doc.Warning, row)
	}

	plain := connect(t, pgtest.Role(t, "api_plain", "pw-plain"))
	psrv := server(t, plain, nil)
	doc, row = rowOf(psrv)
	if !strings.Contains(doc.Warning, "pg_monitor") || strings.Contains(row.Query, "secret-marker-7070") || row.Key != "AGENT 7070" || !row.Granted {
		t.Errorf("plain role: warning %q, row %+v", doc.Warning, row)
	}
	t.Logf("plain role sees: %+v; warning: %s", row, doc.Warning)
	if code, _, body := get(t, psrv.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz as a plain role: %d %s", code, body)
	}
}

func TestEndpointsAndMethods(t *testing.T) {
	snap := func(context.Context) (model.Snapshot, error) { return model.Snapshot{}, nil }
	h := httpapi.New(httpapi.Deps{Snapshot: snap})
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, _, body := get(t, srv.URL+"/api/advisory-locks")
	if code != http.StatusOK || !strings.Contains(string(body), `"locks":[]`) || !strings.Contains(string(body), `"total":0`) {
		t.Errorf("empty table: %d %s", code, body)
	}
	for path, want := range map[string]int{"/": 200, "/healthz": 404, "/metrics": 404, "/nope": 404} {
		if code, _, _ := get(t, srv.URL+path); code != want {
			t.Errorf("GET %s: %d, want %d", path, code, want)
		}
	}
	resp, err := http.Post(srv.URL+"/api/advisory-locks", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
	failing := httptest.NewServer(httpapi.New(httpapi.Deps{
		Snapshot: func(context.Context) (model.Snapshot, error) {
			return model.Snapshot{}, errors.New("boom\nsecond line")
		},
		Health: func(context.Context) error { return errors.New("probe says no") },
	}))
	defer failing.Close()
	if code, _, body := get(t, failing.URL+"/api/advisory-locks"); code != 503 || string(body) != "{\"error\":\"boom second line\"}\n" {
		t.Errorf("failing snapshot: %d %q", code, body)
	}
	if code, _, body := get(t, failing.URL+"/healthz"); code != 503 || !strings.Contains(string(body), `"reason":"probe says no"`) {
		t.Errorf("failing health: %d %s", code, body)
	}
}
