package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// awaitLocks polls the server until match accepts the lock rows of key.
func awaitLocks(t *testing.T, q pglocks.Querier, key lockcore.Key, what string, match func([]model.Lock) bool) []model.Lock {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The test's sessions are named e2e.*: the built-in names, everywhere.
		snap, err := pgsource.InspectWith(context.Background(), q, registry.Everywhere())
		if err != nil {
			t.Fatal(err)
		}
		var rows []model.Lock
		for _, l := range snap.Locks {
			if l.KeyLabel() == key.String() && l.Database != "" {
				rows = append(rows, l)
			}
		}
		if match(rows) {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s on %s: %+v", what, key, rows)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDashboardEndToEnd runs locktop in monitor mode against the test
// database while the test holds an AGENT lock and queues a waiter behind
// it, then works the dashboard as an operator would: pause, filter, help,
// watch the lock change hands, lose the connection and get it back, quit.
func TestDashboardEndToEnd(t *testing.T) {
	bin := buildLocktop(t)
	ctx := context.Background()
	const password = "e2e-Secret-pw-7741"
	// A server of its own: the dashboard shows the advisory locks of every
	// database on its server, and on one shared with other tests
	// (LOCKTOP_TEST_DSN) theirs would crowd this test's lines out of the
	// event log.
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	const dbName = "e2e"
	pool := func(dsn string) *pgxpool.Pool {
		t.Helper()
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	setup := pool(c.DSN("postgres"))
	for _, stmt := range []string{
		"CREATE DATABASE " + dbName,
		"CREATE ROLE locktop_e2e LOGIN PASSWORD '" + password + "'",
		"GRANT pg_monitor TO locktop_e2e",
	} {
		if _, err := setup.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	dsn := c.DSNAs("locktop_e2e", password, dbName)
	logFile := filepath.Join(t.TempDir(), "locktop.log")

	key := lockcore.Pair(registry.SpaceAgent, 4711)
	holders := lockcore.New(pool(c.DSN(dbName)), lockcore.ApplicationName("e2e.holder"), lockcore.Wait(5*time.Minute))
	waiters := lockcore.New(pool(c.DSN(dbName)), lockcore.ApplicationName("e2e.waiter"), lockcore.Wait(5*time.Minute))
	hold, err := holders.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			_ = hold.Release(ctx)
		}
	})
	wctx, stopWaiter := context.WithCancel(ctx)
	granted := make(chan struct{})
	waiterDone := make(chan error, 1)
	go func() {
		waiterDone <- waiters.With(wctx, key, func(ctx context.Context) error {
			close(granted)
			<-ctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() { stopWaiter(); <-waiterDone })
	admin := pool(c.DSN(dbName))
	rows := awaitLocks(t, admin, key, "the waiter to queue", func(r []model.Lock) bool { return len(r) == 2 })
	holderPID, waiterPID := strconv.Itoa(int(rows[0].PID)), strconv.Itoa(int(rows[1].PID))

	// A Redis of its own for the session mutexes, which another client
	// fills later (redis-cli).
	rs, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Stop() })

	term := startTerminal(t, termOptions{Width: 110, Height: 32, Secrets: []string{password}},
		bin, "--registry", "builtin", "--dsn", dsn, "--interval", "250ms", "--log", logFile, "--redis", rs.URL())

	// The holder and its waiter, in queue order, named from the registry.
	term.Await("the holder and the waiter of AGENT 4711", 30*time.Second, func(s string) bool {
		return hasLine(s, "AGENT 4711", "ROOT", holderPID, "e2e.holder", "1w") &&
			hasLine(s, "waits #1", waiterPID, "e2e.waiter", holderPID)
	})

	// Pause and resume.
	term.Keys("Space")
	term.AwaitText(10*time.Second, "PAUSED")
	term.Keys("Space")
	term.AwaitText(10*time.Second, "LIVE")

	// Filter by application: the whole queue stays; then a filter that
	// matches nothing; esc clears it.
	term.Keys("/")
	term.AwaitText(10*time.Second, "enter keep • esc clear")
	term.Type("app:e2e.waiter")
	term.Keys("Enter")
	term.Await("the filtered table", 10*time.Second, func(s string) bool {
		return strings.Contains(s, `filter "app:e2e.waiter": 1 key`) && hasLine(s, "AGENT 4711", "ROOT", holderPID)
	})
	// esc while editing drops the filter.
	term.Keys("/")
	term.AwaitText(10*time.Second, "enter keep • esc clear")
	term.Keys("Escape")
	term.AwaitGone(10*time.Second, `filter "app:e2e.waiter"`)
	term.Keys("/")
	term.AwaitText(10*time.Second, "enter keep • esc clear")
	term.Type("app:nobody-here")
	term.Keys("Enter")
	term.AwaitText(10*time.Second, "No lock matches the filter")
	term.Keys("Escape")
	term.Await("the filter to clear", 10*time.Second, func(s string) bool {
		return !strings.Contains(s, "filter \"") && strings.Contains(s, "AGENT 4711")
	})

	// Help, and back.
	term.Keys("?")
	term.AwaitText(10*time.Second, "Reading the table", "refresh faster", "pause/resume")
	term.Keys("Escape")
	term.AwaitGone(10*time.Second, "Reading the table")

	// Too small a terminal gets a message; back to size, the table returns.
	term.Resize(70, 20)
	term.AwaitText(10*time.Second, "needs a terminal of at least 80×24")
	term.Resize(110, 32)
	term.Await("the table after the resize", 10*time.Second, func(s string) bool {
		return hasLine(s, "AGENT 4711", "ROOT", holderPID)
	})

	// The holder lets go: the waiter holds, and the log says so.
	if err := hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released = true
	<-granted
	term.Await("the waiter to hold AGENT 4711", 30*time.Second, func(s string) bool {
		return hasLine(s, "AGENT 4711", "holds", waiterPID) && !strings.Contains(s, "waits #1") &&
			hasLine(s, "granted", "AGENT 4711", waiterPID)
	})

	// Lose the connection: no new connections to the database, and the
	// monitor's own is ended. A banner, then a reconnect once allowed.
	maint, err := pgx.Connect(ctx, c.DSN("postgres")) // a database may not lock itself out
	if err != nil {
		t.Fatal(err)
	}
	defer maint.Close(ctx)
	allow := func(on bool) {
		t.Helper()
		if _, err := maint.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{dbName}.Sanitize()+" ALLOW_CONNECTIONS "+strconv.FormatBool(on)); err != nil {
			t.Fatal(err)
		}
	}
	allow(false)
	defer allow(true)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locktop.monitor' AND datname = current_database()"); err != nil {
		t.Fatal(err)
	}
	term.AwaitText(30*time.Second, "no connection · retry", "reconnecting")
	allow(true)
	term.Await("the reconnect", 60*time.Second, func(s string) bool {
		return !strings.Contains(s, "no connection") && strings.Contains(s, "connected") &&
			hasLine(s, "reconnected after")
	})

	// Another client takes a Redis session mutex (redis-cli SET … PX) and a
	// row lock with a SELECT … FOR UPDATE waiter behind it: each shows in
	// the one table with its kind, holder and waiter.
	if out, err := exec.Command("redis-cli", "-s", rs.Socket(), "SET", "sesslock:t1:a1:c1:web", "tok-e2e-123456", "PX", "600000").CombinedOutput(); err != nil {
		t.Fatalf("redis-cli: %v: %s", err, out)
	}
	if _, err := admin.Exec(ctx, "CREATE TABLE e2e_turns (id int PRIMARY KEY); INSERT INTO e2e_turns VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	rowTx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rowTx.Rollback(ctx)
	if _, err := rowTx.Exec(ctx, "SELECT * FROM e2e_turns WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	rowWaiter, err := admin.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopRow := context.WithCancel(ctx)
	rowDone := make(chan struct{})
	go func() {
		defer close(rowDone)
		_, _ = rowWaiter.Exec(rctx, "SELECT * FROM e2e_turns WHERE id = 1 FOR UPDATE")
	}()
	defer func() { stopRow(); <-rowDone; rowWaiter.Release() }()
	term.Await("a Redis session mutex and a row lock wait, each with its kind", 30*time.Second, func(s string) bool {
		return hasLine(s, "KIND") && hasLine(s, "redis", "sesslock:t1:a1:c1:web", "holds", "token tok-e2", "ttl") &&
			hasLine(s, "row", "public.e2e_turns row (0,1)", "ROOT") &&
			// The holder's time cell carries its transaction's age, so MODE
			// may fold into the state ("waits #1 sh").
			(hasLine(s, "└─", "waits #1", "share") || hasLine(s, "└─", "waits #1 sh")) &&
			hasLine(s, "by kind", "advisory", "row 1·1w", "redis 1")
	})

	// Quit: the process ends, cleanly.
	term.Keys("q")
	if code := term.AwaitExit(20 * time.Second); code != 0 {
		t.Fatalf("locktop exited with %d", code)
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), password) {
		t.Errorf("the password is in the log:\n%s", log)
	}
	if !strings.Contains(string(log), "poll failed") || !strings.Contains(string(log), "reconnected") {
		t.Errorf("the log does not record the outage:\n%s", log)
	}
}

// clusterDir reads from locktop's log the directory of the throw-away
// cluster it started, waiting for the line to be written.
func clusterDir(t *testing.T, logFile string) string {
	t.Helper()
	re := regexp.MustCompile(`server="throw-away cluster" dir=(\S+)`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if m := re.FindSubmatch(b); m != nil {
			return string(m[1])
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster directory in the log:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitRemoved waits until dir is gone.
func awaitRemoved(t *testing.T, dir string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the throw-away cluster %s is still there after %v", dir, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDashboardEmbedded runs locktop with no server given: it starts a
// throw-away PostgreSQL, shows the dashboard on it, and removes the cluster
// when the operator quits, and when the terminal is closed under it.
func TestDashboardEmbedded(t *testing.T) {
	bin := buildLocktop(t)
	for _, how := range []string{"quit", "close the terminal"} {
		t.Run(how, func(t *testing.T) {
			logFile := filepath.Join(t.TempDir(), "locktop.log")
			term := startTerminal(t, termOptions{Width: 100, Height: 30}, bin, "--log", logFile)
			dir := clusterDir(t, logFile)
			term.AwaitText(60*time.Second, "locktop", "postgres@/tmp/locktop-pg-", ":5432/postgres", "connected", "Locks")
			if how == "quit" {
				// The demo's scenario (all) and its hot agents: a holder of
				// an AGENT lock with a waiter queued behind it, and the
				// simulator panel with its invariants.
				term.Await("an AGENT holder with a queued waiter", 60*time.Second, func(s string) bool {
					return (hasLine(s, "AGENT", "holds") || hasLine(s, "AGENT", "ROOT")) && hasLine(s, "waits #1") &&
						strings.Contains(s, "Simulator all") && strings.Contains(s, "invariants hold")
				})
				term.Keys("Space")
				term.AwaitText(10*time.Second, "PAUSED")
				term.Keys("Space")
				term.AwaitText(10*time.Second, "LIVE")
				term.Keys("/")
				term.AwaitText(10*time.Second, "enter keep • esc clear")
				term.Type("ns:AGENT")
				term.Keys("Enter")
				term.AwaitText(10*time.Second, `filter "ns:AGENT"`)
				term.Keys("Escape")
				term.AwaitGone(10*time.Second, `filter "ns:AGENT"`)
				term.Keys("?")
				term.AwaitText(10*time.Second, "Reading the table", "pause/resume")
				term.Keys("Escape")
				term.AwaitGone(10*time.Second, "Reading the table")
				term.Keys("l")
				term.AwaitText(10*time.Second, "locks OFF")
				term.Keys("l")
				term.AwaitText(10*time.Second, "locks ON")
				term.Keys("q")
				if code := term.AwaitExit(60 * time.Second); code != 0 {
					t.Fatalf("locktop exited with %d", code)
				}
			} else {
				term.Close()
			}
			awaitRemoved(t, dir, 60*time.Second)
		})
	}
}

// TestDashboardNoColor checks NO_COLOR in a real terminal: colour codes
// without it, none with it (bold and reverse stay).
func TestDashboardNoColor(t *testing.T) {
	bin := buildLocktop(t)
	key := lockcore.Pair(registry.SpaceAgent, 4712)
	hold, err := lockcore.New(pgtest.Pool(t, nil)).Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hold.Release(context.Background()) })
	for _, noColor := range []bool{false, true} {
		env := []string{"TERM=xterm-256color"}
		if noColor {
			env = append(env, "NO_COLOR=yes") // any non-empty value, https://no-color.org
		}
		term := startTerminal(t, termOptions{Width: 100, Height: 30, Env: env},
			bin, "--dsn", pgtest.DSN(t), "--log", filepath.Join(t.TempDir(), "l.log"))
		term.AwaitText(30*time.Second, "AGENT 4712", "connected")
		colours := sgrColours(term.ScreenANSI())
		if noColor && colours > 0 {
			t.Errorf("NO_COLOR: %d colour codes on screen:\n%q", colours, term.ScreenANSI())
		}
		if !noColor && colours == 0 {
			t.Errorf("no colour codes without NO_COLOR: the check cannot fail")
		}
		term.Keys("q")
		if code := term.AwaitExit(20 * time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
}

// TestDashboardAtCommonSizes works the screen items of issue 14 in a real
// terminal at 80×24, 120×36 and 200×60, without colour: the simulator
// attached to a server of the test's own, a holder idle in a transaction
// with a waiter queued behind it for more than 5 s, and --http on every
// interface. At each size: the header names the server, the --http warning
// is on screen, applications, rates and event lines are whole, the exact
// filter finds one key, the idle holder is flagged, the waiter's !! is
// whole, and the details overlay covers what is under it. Then q quits from
// the scenario picker.
func TestDashboardAtCommonSizes(t *testing.T) {
	bin := buildLocktop(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	conn := func(app string) *pgx.Conn { return appConn(t, c, app) }
	idle := conn("e2e.idle")
	tx, err := idle.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(1, 4713)"); err != nil {
		t.Fatal(err)
	}
	waiter := conn("e2e.waiter")
	wctx, stopWaiter := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = waiter.Exec(wctx, "SELECT pg_advisory_lock(1, 4713)")
	}()
	t.Cleanup(func() { stopWaiter(); <-waited })
	rows := awaitLocks(t, conn("e2e.admin"), lockcore.Pair(registry.SpaceAgent, 4713), "the waiter to queue", func(r []model.Lock) bool { return len(r) == 2 })
	idlePID, waiterPID := strconv.Itoa(int(rows[0].PID)), strconv.Itoa(int(rows[1].PID))

	term := startTerminal(t, termOptions{Width: 80, Height: 24, Env: []string{"TERM=xterm-256color", "NO_COLOR=1"}},
		bin, "--registry", "builtin", "--dsn", c.DSN("postgres"), "--sim", "--http", "0.0.0.0:0", "--interval", "500ms",
		"--log", filepath.Join(t.TempDir(), "locktop.log"))
	term.AwaitText(60*time.Second, "Locks", "Simulator")
	server := "postgres@" + c.SocketDir() + ":5432/postgres"
	for _, sz := range [][2]int{{80, 24}, {120, 36}, {200, 60}} {
		t.Logf("%dx%d", sz[0], sz[1])
		term.Resize(sz[0], sz[1])
		term.Expect(fmt.Sprintf("server %s in the header at %dx%d", server, sz[0], sz[1]), 10*time.Second, func(s string) bool {
			return strings.Contains(strings.SplitN(s, "\n", 2)[0], server)
		})
		term.Expect("the --http warning on screen", 5*time.Second, func(s string) bool {
			return strings.Contains(s, "reachable from other machines")
		})
		term.Expect("a simulator row with its application whole", 30*time.Second, func(s string) bool {
			return hasLine(s, "AGENT ", "holds", "locktop.lock")
		})
		if sz[0] >= 120 {
			term.Expect("every rate whole", 5*time.Second, func(s string) bool {
				return strings.Contains(s, "remote sends/s 1.0") && strings.Contains(s, "hooks/s 80")
			})
			// Those events come as the simulator's work allows: seen missing
			// for 30s at load 17.
			term.Expect("an event line with its detail whole", 60*time.Second, func(s string) bool {
				return strings.Contains(s, "already COMPLETE: skipped") || strings.Contains(s, "row locked by another transaction")
			})
		}
		term.Keys("/")
		term.Type("ns:AGENT =4713")
		term.Keys("Enter")
		term.Expect("the exact filter's one key", 10*time.Second, func(s string) bool {
			return strings.Contains(s, `filter "ns:AGENT =4713": 1 key`)
		})
		term.Expect("the idle-in-transaction holder flagged", 10*time.Second, func(s string) bool {
			return hasLine(s, "AGENT 4713", idlePID, "e2e.idle", "idle in tx")
		})
		term.Expect("the waiter's !! whole", 20*time.Second, func(s string) bool {
			return hasLine(s, "waits #1", waiterPID, "e2e.waiter", "!!")
		})
		if sz[0] <= 120 {
			term.Keys("Enter")
			term.Expect("the details overlay alone", 10*time.Second, func(s string) bool {
				return strings.Contains(s, "Blocking chain") && len(besideBox(s)) == 0 && strings.Contains(s, "pid "+idlePID)
			})
			term.Keys("Escape")
			term.AwaitGone(10*time.Second, "Blocking chain")
		}
		term.Keys("Escape") // clears the filter
		term.AwaitGone(10*time.Second, `filter "`)
	}
	// q in a picker quits, as it does in the help.
	term.Keys("s")
	term.AwaitText(10*time.Second, "Switch scenario")
	term.Keys("q")
	if code := term.AwaitExit(60 * time.Second); code != 0 {
		t.Fatalf("locktop exited with %d", code)
	}
}

// appConn connects to the cluster's postgres database as application app,
// closed when the test ends.
func appConn(t *testing.T, c *pgcluster.Cluster, app string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = app
	cn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cn.Close(context.Background()) })
	return cn
}
