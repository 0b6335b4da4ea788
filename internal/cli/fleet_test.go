package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// startClusters starts n throw-away servers of the test's own, at once.
func startClusters(t *testing.T, n int) []*pgcluster.Cluster {
	t.Helper()
	cs := make([]*pgcluster.Cluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { cs[i], errs[i] = pgcluster.Start(context.Background(), pgcluster.Options{}) })
	}
	wg.Wait()
	for i, c := range cs {
		if c != nil {
			t.Cleanup(func() { _ = c.Stop() })
		}
		if errs[i] != nil {
			t.Fatalf("no server of the test's own: %v", errs[i])
		}
	}
	return cs
}

// advisoryQueue makes a queue on advisory key (space, n) of c: one
// session holds it, waiters more wait for it. The test's end lets them go.
func advisoryQueue(t *testing.T, c *pgcluster.Cluster, n, waiters int, space ...int) {
	t.Helper()
	ctx := context.Background()
	sp := 7
	if len(space) > 0 {
		sp = space[0]
	}
	holder := appConn(t, c, "pile.holder")
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($2, $1)", n, sp); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	for range waiters {
		cn := appConn(t, c, "pile.waiter")
		done := make(chan struct{})
		t.Cleanup(func() { cancel(); <-done })
		go func() {
			defer close(done)
			_, _ = cn.Exec(bctx, "SELECT pg_advisory_lock($2, $1)", n, sp)
		}()
	}
	pgtest.Eventually(t, "the waiters queue", func() bool {
		var got int
		err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&got)
		return err == nil && got == waiters
	})
}

// monitorPIDs are the backends of locktop's monitor on c.
func monitorPIDs(t *testing.T, admin *pgx.Conn) []int32 {
	t.Helper()
	rows, err := admin.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1 ORDER BY pid", pgsource.ApplicationName+"%")
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// serve --target a=… --target b=… --target c=…: /api/locks names each
// lock's server, a pile-up on b shows as b's; each target is watched over
// one persistent connection (the same backends over many polls: no
// churn); with c stopped, /healthz says c is down while a and b are up and
// fresh, and /metrics labels each target's gauges with its server; started
// again, c is up again.
func TestServeCollectsSeveralTargets(t *testing.T) {
	cs := startClusters(t, 3)
	names := []string{"a", "b", "c"}
	advisoryQueue(t, cs[1], 1, 3)
	held := appConn(t, cs[0], "hold.a")
	if _, err := held.Exec(context.Background(), "SELECT pg_advisory_lock(7, 99)"); err != nil {
		t.Fatal(err)
	}

	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	args := []string{"--http", "127.0.0.1:0", "--interval", "100ms"}
	for i, c := range cs {
		args = append(args, "--target", names[i]+"="+c.DSN("postgres"))
	}
	go func() { errc <- runServe(sctx, args, &stdout, &stderr) }()
	base := waitURL(t, &stdout, errc)
	if !strings.Contains(stdout.String(), "collecting from 3 servers: a, b, c") {
		t.Errorf("serve's first line: %q", stdout.String())
	}
	// locks is /api/locks, once a source has answered (503 before).
	locks := func() httpapi.LocksDocument {
		t.Helper()
		code, body := httpGet(t, base+"/api/locks")
		var doc httpapi.LocksDocument
		if err := json.Unmarshal(body, &doc); err != nil || (code != http.StatusOK && code != http.StatusServiceUnavailable) {
			t.Fatalf("/api/locks: %d %s (%v)", code, body, err)
		}
		return doc
	}
	health := func() (int, httpapi.Health) {
		t.Helper()
		code, body := httpGet(t, base+"/healthz")
		var h httpapi.Health
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatalf("/healthz: %d %s (%v)", code, body, err)
		}
		return code, h
	}
	var doc httpapi.LocksDocument
	pgtest.Eventually(t, "every target's locks in /api/locks", func() bool {
		doc = locks()
		return len(doc.Locks) == 5
	})
	for _, l := range doc.Locks {
		want := "b"
		if l.Key == "7 99" {
			want = "a"
		}
		if l.Server != want {
			t.Errorf("lock %s (%s, granted %v): server %q, want %q", l.Key, l.Source, l.Granted, l.Server, want)
		}
		if !strings.HasPrefix(l.Source, want+"/") {
			t.Errorf("lock %s: source %q, want %s/…", l.Key, l.Source, want)
		}
	}
	if doc.Waiting != 3 {
		t.Errorf("waiting %d, want 3 (b's queue)", doc.Waiting)
	}

	// One monitor connection per target, the same over many polls.
	admins := make([]*pgx.Conn, len(cs))
	first := make([][]int32, len(cs))
	for i, c := range cs {
		admins[i] = appConn(t, c, "e2e.admin")
		first[i] = monitorPIDs(t, admins[i])
	}
	waitPolls(t, base, 20)
	for i := range cs {
		now := monitorPIDs(t, admins[i])
		t.Logf("target %s: locktop's backends %v", names[i], now)
		if !slices.Equal(now, first[i]) {
			t.Errorf("target %s: locktop's backends went from %v to %v over 20 polls: connection churn", names[i], first[i], now)
		}
		if len(now) != 1 {
			t.Errorf("target %s: %d locktop backends %v, want one connection per target", names[i], len(now), now)
		}
	}

	code, h := health()
	if code != http.StatusOK || h.Status != "ok" || len(h.Targets) != 3 {
		t.Fatalf("/healthz with every target up: %d %+v", code, h)
	}
	cs[2].Down()
	pgtest.Eventually(t, "c down in /healthz", func() bool {
		_, h = health()
		return len(h.Targets) == 3 && !h.Targets[2].Up
	})
	if h.Status != "degraded" || !strings.HasPrefix(h.Reason, "c: ") {
		t.Errorf("/healthz with c down: status %q reason %q, want degraded, c's", h.Status, h.Reason)
	}
	for _, tg := range h.Targets[:2] {
		if !tg.Up || !tg.Fresh {
			t.Errorf("/healthz with c down: %+v, want up and fresh", tg)
		}
	}
	if h.Targets[2].Fresh || h.Targets[2].Error == "" {
		t.Errorf("/healthz: c %+v, want not fresh, with its error", h.Targets[2])
	}
	// a and b keep updating: their newest answers are newer than c's fall.
	down := time.Now()
	pgtest.Eventually(t, "a and b answer after c fell", func() bool {
		_, h = health()
		return h.Targets[0].Fresh && h.Targets[1].Fresh && time.Duration(h.Targets[1].Age*float64(time.Second)) < time.Since(down)
	})
	// /metrics shows the merged snapshot, published once a second, which
	// may be a merge older than /healthz's view of c.
	wants := []string{`locktop_snapshot_locks_waiting{database="postgres",kind="advisory",namespace="7",server="b"} 3`,
		`locktop_source_up{server="c",source="postgres"} 0`, `locktop_source_up{server="a",source="postgres"} 1`}
	pgtest.Eventually(t, "/metrics with c down: "+strings.Join(wants, ", "), func() bool {
		_, metrics := httpGet(t, base+"/metrics")
		for _, want := range wants {
			if !strings.Contains(string(metrics), want) {
				return false
			}
		}
		return true
	})
	if err := cs[2].Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, "c up again in /healthz", func() bool {
		code, h = health()
		return code == http.StatusOK && h.Status == "ok" && h.Targets[2].Up && h.Targets[2].Fresh
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// waitPolls waits until the collector has published n more snapshots.
func waitPolls(t *testing.T, base string, n int) {
	t.Helper()
	taken := func() time.Time {
		_, body := httpGet(t, base+"/api/locks")
		var doc httpapi.LocksDocument
		_ = json.Unmarshal(body, &doc)
		return doc.Taken
	}
	last, seen := taken(), 0
	deadline := time.Now().Add(60 * time.Second)
	for seen < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d polls in a minute", seen, n)
		}
		time.Sleep(20 * time.Millisecond)
		if now := taken(); now.After(last) {
			last, seen = now, seen+1
		}
	}
}

// The fleet in one pane, in a terminal: three servers and a Redis. A
// pile-up on the second shows with its server's name; the third stopped
// shows its own banner, only that one, and the others keep updating;
// started again, its banner goes.
func TestDashboardFleetEndToEnd(t *testing.T) {
	t.Parallel() // servers and a terminal of its own: it waits beside the others
	bin := buildLocktop(t)
	ctx := context.Background()
	cs := startClusters(t, 3)
	rs := redistest.Private(t)
	term := startTerminal(t, termOptions{Width: 120, Height: 32}, bin, "--registry", "builtin",
		"--target", "a="+cs[0].DSN("postgres"), "--target", "b="+cs[1].DSN("postgres"), "--target", "c="+cs[2].DSN("postgres"),
		"--redis", rs.URL(), "--interval", "500ms", "--log", filepath.Join(t.TempDir(), "locktop.log"))
	term.AwaitText(60*time.Second, "3 servers · 3 up", "none waiting")

	// A Redis session mutex beside a, and a pile-up of AGENT 4712 on b.
	lk := redislock.New(redistest.ClientOf(t, rs), redislock.Options{Owner: "fleet-e2e", TTL: time.Minute})
	defer lk.Close()
	held, err := lk.Acquire(ctx, redislock.SessionKey("t1", "a1", "c1", "web"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	advisoryQueue(t, cs[1], 4712, 3, 1)
	screen := term.Await("b's pile-up under b, a's Redis key under a", 30*time.Second, func(s string) bool {
		return hasLine(s, " b ", "AGENT 4712", "ROOT") && hasLine(s, " a ", "sesslock:") && strings.Contains(s, "3 waiting (b 3)")
	})
	if !strings.Contains(screen, "SERVER") {
		t.Errorf("no SERVER column:\n%s", screen)
	}

	// c stops: its banner, and no other.
	cs[2].Down()
	screen = term.AwaitText(30*time.Second, "c/postgres: no connection", "down (c)")
	if n := strings.Count(screen, "no connection"); n != 1 {
		t.Errorf("%d banners with c down, want c's only:\n%s", n, screen)
	}
	// The others keep updating: a new hold on a shows while c is down.
	hold := appConn(t, cs[0], "fleet.later")
	if _, err := hold.Exec(ctx, "SELECT pg_advisory_lock(1, 4713)"); err != nil {
		t.Fatal(err)
	}
	term.Await("a's new hold while c is down", 30*time.Second, func(s string) bool {
		return hasLine(s, " a ", "AGENT 4713") && strings.Contains(s, "c/postgres: no connection")
	})

	// c back: the banner goes.
	if err := cs[2].Up(ctx); err != nil {
		t.Fatal(err)
	}
	term.AwaitGone(90*time.Second, "c/postgres: no connection")
	term.AwaitText(30*time.Second, "3 servers · 3 up")

	// v shows b alone, then c, then every server again.
	term.Keys("v")
	term.AwaitText(10*time.Second, "server a alone")
	term.Keys("v")
	screen = term.AwaitText(10*time.Second, "server b alone")
	if !hasLine(screen, " b ", "AGENT 4712") || hasLine(screen, "AGENT 4713", "holds") {
		t.Errorf("server b alone shows another server's lock, or not its own:\n%s", screen)
	}
	term.Keys("q")
	if code := term.AwaitExit(30 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// A target that is down when serve starts does not stop it: the others
// are served, the dead one is down in /healthz with its error, and a bad
// connection string still stops serve at once (exit 2).
func TestServeStartsWithATargetDown(t *testing.T) {
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	dead := "host=" + t.TempDir() + " connect_timeout=2"
	go func() {
		errc <- runServe(sctx, []string{"--http", "127.0.0.1:0", "--interval", "100ms", "--target", "up=" + pgtest.DSN(t), "--target", "dead=" + dead}, &stdout, &stderr)
	}()
	base := waitURL(t, &stdout, errc)
	var h httpapi.Health
	// dead is "not polled yet" until its first connect gives up.
	pgtest.Eventually(t, "up up and dead down with its error in /healthz", func() bool {
		code, body := httpGet(t, base+"/healthz")
		h = httpapi.Health{}
		_ = json.Unmarshal(body, &h)
		return code == http.StatusOK && len(h.Targets) == 2 && h.Targets[0].Up && h.Targets[0].Fresh && !h.Targets[1].Up &&
			h.Targets[1].Error != "not polled yet"
	})
	if h.Status != "degraded" || !strings.Contains(h.Targets[1].Error, "cannot reach the server") {
		t.Errorf("/healthz: %+v", h)
	}
	if !strings.Contains(stderr.String(), "target not answering") {
		t.Errorf("the dead target at start is not logged: %s", stderr.String())
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	expectExit(t, []string{"serve", "--target", "up=" + pgtest.DSN(t), "--target", "bad=postgres://u:hunter6@h:notaport/db"}, exitUsage, "target bad: bad DSN", "hunter6")
}
