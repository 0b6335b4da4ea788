package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// While PostgreSQL is down, serve's other sources go on: a Redis session
// key set during the outage appears in /api/locks, whose sources say
// postgres failed, and /healthz's sources say the same (not postgres
// ok=true with the time before the outage). The health check's failure is
// logged once, not every second.
func TestServeOtherSourcesLiveThroughPostgresOutage(t *testing.T) {
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("no server of the test's own: %v", err)
	}
	defer c.Stop()
	rs := redistest.Private(t)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runServe(sctx, []string{"--dsn", c.DSN("postgres"), "--redis", rs.URL(), "--http", "127.0.0.1:0", "--interval", "100ms"}, &stdout, &stderr)
	}()
	base := waitURL(t, &stdout, errc)
	locks := func() httpapi.LocksDocument {
		t.Helper()
		code, body := httpGet(t, base+"/api/locks")
		var doc httpapi.LocksDocument
		if err := json.Unmarshal(body, &doc); err != nil || code != http.StatusOK {
			t.Fatalf("/api/locks: %d %s (%v)", code, body, err)
		}
		return doc
	}
	pgtest.Eventually(t, "both sources answer", func() bool {
		d := locks()
		return sourceOK(d.Sources, "postgres") == "ok" && sourceOK(d.Sources, "redis") == "ok"
	})

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	lk := redislock.New(redistest.ClientOf(t, rs), redislock.Options{Owner: "during-outage", TTL: time.Minute})
	defer lk.Close()
	held, err := lk.Acquire(ctx, redislock.SessionKey("t1", "a1", "c1", "web"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	var doc httpapi.LocksDocument
	deadline := time.Now().Add(20 * time.Second)
	for {
		doc = locks()
		found := false
		for _, l := range doc.Locks {
			found = found || (l.Kind == "redis" && l.Owner == "during-outage")
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			body, _ := json.Marshal(doc)
			t.Fatalf("the Redis key set during the outage never appeared in /api/locks: %s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if sourceOK(doc.Sources, "postgres") != "failed" || sourceOK(doc.Sources, "redis") != "ok" {
		t.Errorf("/api/locks sources during the outage: %+v", doc.Sources)
	}
	code, body := httpGet(t, base+"/healthz")
	var h httpapi.Health
	if err := json.Unmarshal(body, &h); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz: %d %s (%v)", code, body, err)
	}
	if sourceOK(h.Sources, "postgres") != "failed" || sourceOK(h.Sources, "redis") != "ok" {
		t.Errorf("/healthz sources during the outage: %s", body)
	}
	// Several more health checks, each a second apart, fail: logged once.
	for range 3 {
		time.Sleep(httpapi.DefaultHealthMaxAge + 100*time.Millisecond)
		httpGet(t, base+"/healthz")
	}
	if n := strings.Count(stderr.String(), "health check failed"); n != 1 {
		t.Errorf("the failing health check logged %d times, want once:\n%s", n, stderr.String())
	}
	cancel()
	<-errc
}

// sourceOK says how the named source answered: "ok", "failed" (with an
// error), or "missing".
func sourceOK(sources []httpapi.SourceDoc, name string) string {
	for _, s := range sources {
		switch {
		case s.Name != name:
		case s.OK:
			return "ok"
		case s.Error != "":
			return "failed"
		}
	}
	return "missing"
}
