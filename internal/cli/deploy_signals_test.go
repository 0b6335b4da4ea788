package cli

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/lease"
)

// The alerts of deploy/prometheus read what a real collector serves: a
// lease taken over from a stale holder steps locktop_lease_recoveries_total
// (LocktopLeaseRecovered); a Redis that stops puts its locktop_source_up at
// 0 (LocktopRedisSourceDown); a PostgreSQL that stops either puts
// locktop_source_up{source="postgres"} at 0 or freezes
// locktop_snapshot_timestamp_seconds (LocktopTargetDown reads both).
func TestDeployAlertInputs(t *testing.T) {
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("no server of the test's own: %v", err)
	}
	defer c.Stop()
	pool, err := pgxpool.New(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	open := func(o lease.Options) *lease.Manager {
		m, err := lease.OpenPostgres(ctx, pool, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	a := open(lease.Options{Owner: "A", Lease: 100 * time.Millisecond, Heartbeat: -1})
	b := open(lease.Options{Owner: "B", Grace: 10 * time.Millisecond})
	rs := redistest.Private(t)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runServe(sctx, []string{"--dsn", c.DSN("postgres"), "--redis", rs.URL(), "--http", "127.0.0.1:0", "--interval", "100ms"}, &stdout, &stderr)
	}()
	base := waitURL(t, &stdout, errc)
	metric := func(series string) (float64, bool) {
		t.Helper()
		_, body := httpGet(t, base+"/metrics")
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatalf("%s: %v", series, err)
		}
		return v, true
	}
	is := func(series string, want float64) func() bool {
		return func() bool { v, ok := metric(series); return ok && v == want }
	}
	recovered := `locktop_lease_recoveries_total{namespace="MAP"}`
	pgtest.Eventually(t, "every source answers and no recovery is counted", func() bool {
		return is(`locktop_source_up{source="redis"}`, 1)() && is(`locktop_source_up{source="lease"}`, 1)() && is(recovered, 0)()
	})

	// A's lease runs out with no heartbeat; B takes the map over.
	old, err := a.Acquire(ctx, lease.Map("m1"), lease.Write)
	if err != nil {
		t.Fatal(err)
	}
	took, err := b.Acquire(ctx, lease.Map("m1"), lease.Write)
	if err != nil {
		t.Fatal(err)
	}
	if took.Fence() <= old.Fence() {
		t.Fatalf("B's fence %d is not past A's %d: no takeover", took.Fence(), old.Fence())
	}
	pgtest.Eventually(t, "the takeover is counted once", is(recovered, 1))
	if err := took.Release(ctx); err != nil {
		t.Fatal(err)
	}

	rs.Halt()
	pgtest.Eventually(t, "the stopped Redis is down in /metrics", is(`locktop_source_up{source="redis"}`, 0))

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// Once the outage is seen, ten polls' time shows either signal.
	pgtest.Eventually(t, "a poll failed", func() bool { v, _ := metric("locktop_monitor_poll_errors_total"); return v > 0 })
	taken, _ := metric("locktop_snapshot_timestamp_seconds")
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if v, ok := metric(`locktop_source_up{source="postgres"}`); ok && v == 0 {
			return
		}
		if v, _ := metric("locktop_snapshot_timestamp_seconds"); v != taken {
			t.Fatalf("PostgreSQL is down, yet the snapshot time moved from %v to %v and postgres is not down in /metrics", taken, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
