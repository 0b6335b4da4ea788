package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/locktop/locktop/internal/source/pglocks"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/serve/metrics"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// holdMany holds n advisory locks (space 3) spread over 20 connections,
// until the benchmark ends.
func holdMany(b *testing.B, n int) {
	b.Helper()
	const conns = 20
	if n == 0 {
		return
	}
	for c := range conns {
		conn := pgtest.Conn(b)
		per := n / conns
		if _, err := conn.Exec(context.Background(),
			"SELECT pg_advisory_lock(3, g) FROM generate_series($1::int, $2::int) g", c*per+1, (c+1)*per); err != nil {
			b.Fatal(err)
		}
	}
}

func benchMonitor(b *testing.B, held int) (*pgsource.Monitor, model.Snapshot) {
	b.Helper()
	holdMany(b, held)
	mon, err := pgsource.Connect(context.Background(), pgtest.DSN(b), pgsource.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(mon.Close)
	snap, err := mon.Poll(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if h, _ := snap.Counts(); h < held {
		b.Fatalf("%d held locks seen, want at least %d", h, held)
	}
	return mon, snap
}

func fetch(b *testing.B, c *http.Client, url string) {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
	b.SetBytes(n)
}

// GET /api/advisory-locks at 1,000 held locks, polling the server on every
// request (no Latest in front): the worst case.
func BenchmarkAdvisoryLocks1000Polled(b *testing.B) {
	mon, _ := benchMonitor(b, 1000)
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Snapshot: mon.Poll, Info: mon.Info}))
	defer srv.Close()
	c := srv.Client()
	for b.Loop() {
		fetch(b, c, srv.URL+"/api/advisory-locks")
	}
}

// GET /api/advisory-locks at 1,000 held locks from a poll loop's snapshot
// (Latest), as `locktop serve` answers: encoding and HTTP only.
func BenchmarkAdvisoryLocks1000Latest(b *testing.B) {
	mon, snap := benchMonitor(b, 1000)
	latest := httpapi.NewLatest(nil, 0)
	latest.Put(snap)
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Snapshot: latest.Snapshot, Info: mon.Info}))
	defer srv.Close()
	c := srv.Client()
	for b.Loop() {
		fetch(b, c, srv.URL+"/api/advisory-locks")
	}
}

// The bare statement the monitor sends, for comparison with the polled
// endpoint.
func BenchmarkInspectSQL1000(b *testing.B) {
	mon, _ := benchMonitor(b, 1000)
	ctx := context.Background()
	for b.Loop() {
		rows, err := mon.Pool().Query(ctx, pglocks.SQL)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// Building and encoding the document alone.
func BenchmarkDocument1000(b *testing.B) {
	mon, snap := benchMonitor(b, 1000)
	info := mon.Info()
	for b.Loop() {
		if _, err := json.Marshal(httpapi.NewDocument(snap, info)); err != nil {
			b.Fatal(err)
		}
	}
}

// A /metrics scrape after a snapshot of 1,000 held locks.
func BenchmarkMetrics1000(b *testing.B) {
	_, snap := benchMonitor(b, 1000)
	met := metrics.New()
	met.Snapshot(snap)
	srv := httptest.NewServer(met.Handler())
	defer srv.Close()
	c := srv.Client()
	for b.Loop() {
		fetch(b, c, srv.URL)
	}
}

// GET /healthz: ping, lock, unlock on the monitor's connection.
func BenchmarkHealthz(b *testing.B) {
	mon, _ := benchMonitor(b, 0)
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Snapshot: mon.Poll, Health: mon.Probe}))
	defer srv.Close()
	c := srv.Client()
	for b.Loop() {
		fetch(b, c, srv.URL+"/healthz")
	}
}

// The monitor's poll (the statement, decoding, blockers, held times), for
// comparison with the bare statement and the polled endpoint.
func BenchmarkPoll1000(b *testing.B) {
	mon, _ := benchMonitor(b, 1000)
	ctx := context.Background()
	for b.Loop() {
		if _, err := mon.Poll(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
