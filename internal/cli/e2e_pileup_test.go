package cli

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// pileModes are the words the table may show for a mode: its name, or
// PostgreSQL's short name where the table is narrow (see the help).
var pileModes = map[string][]string{
	"AccessShareLock":     {"AccessShare", "AccShr"},
	"RowShareLock":        {"RowShare", "RowShr"},
	"RowExclusiveLock":    {"RowExclusive", "RowExcl"},
	"ShareLock":           {"share"},
	"ExclusiveLock":       {"excl"},
	"AccessExclusiveLock": {"AccessExclusive", "AccExcl"},
}

// TestDashboardPileupAt80x24 builds issue 21's DDL pile-up on a server of
// its own: a transaction that read accounts and stays open, an ALTER
// TABLE queued behind it and four SELECTs behind the ALTER; a row-lock
// queue where one session holds row 6 and waits for row 5; two advisory
// queues. At 80×24 every session of it is on screen with its mode, and
// the open transaction is marked as the root blocker, first.
func TestDashboardPileupAt80x24(t *testing.T) {
	t.Parallel() // servers and a terminal of its own: it waits beside the others
	bin := buildLocktop(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	conn := func(app string) *pgx.Conn { return appConn(t, c, app) }
	exec := func(cn *pgx.Conn, sql string) {
		t.Helper()
		if _, err := cn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// block runs sql on a session of its own, which waits; the test's end
	// cancels it.
	bctx, cancel := context.WithCancel(ctx)
	block := func(app string, sqls ...string) {
		t.Helper()
		cn := conn(app)
		d := make(chan struct{})
		// Registered after the connection's own clean-up, so it runs
		// first: the statement ends before its connection is closed.
		t.Cleanup(func() {
			cancel()
			<-d
		})
		go func() {
			defer close(d)
			for _, s := range sqls {
				if _, err := cn.Exec(bctx, s); err != nil {
					return
				}
			}
		}()
	}
	admin := conn("e2e.admin")
	exec(admin, "CREATE TABLE accounts (id int PRIMARY KEY); INSERT INTO accounts SELECT generate_series(1, 10)")
	exec(admin, "CREATE TABLE orders (id int PRIMARY KEY); INSERT INTO orders SELECT generate_series(1, 10)")
	waiters := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var got int
			if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waits, want %d", got, n)
			}
			time.Sleep(50 * time.Millisecond) // polling the server, with a deadline
		}
	}

	// The open transaction that read accounts, the ALTER behind it, the
	// SELECTs behind the ALTER.
	report := conn("report")
	exec(report, "BEGIN")
	exec(report, "SELECT count(*) FROM accounts")
	block("migrate", "ALTER TABLE accounts ADD COLUMN note text")
	waiters(1)
	for i := range 4 {
		block("api", "SELECT * FROM accounts WHERE id = "+strconv.Itoa(i+1))
		waiters(2 + i)
	}
	// The row-lock queue: B holds row 5; A holds row 6 and waits for row
	// 5; two more wait, one behind each.
	b := conn("checkout.b")
	exec(b, "BEGIN")
	exec(b, "SELECT * FROM orders WHERE id = 5 FOR UPDATE")
	block("checkout.a", "BEGIN", "SELECT * FROM orders WHERE id = 6 FOR UPDATE", "SELECT * FROM orders WHERE id = 5 FOR UPDATE")
	waiters(6)
	block("checkout.c", "SELECT * FROM orders WHERE id = 5 FOR UPDATE")
	waiters(7)
	block("refund", "SELECT * FROM orders WHERE id = 6 FOR UPDATE")
	waiters(8)
	// Two advisory queues: AGENT 7 with two waiters, AGENT 9 with one.
	exec(conn("agent.holder7"), "SELECT pg_advisory_lock(1, 7)")
	block("agent.w7a", "SELECT pg_advisory_lock(1, 7)")
	block("agent.w7b", "SELECT pg_advisory_lock(1, 7)")
	exec(conn("agent.holder9"), "SELECT pg_advisory_lock(1, 9)")
	block("agent.w9", "SELECT pg_advisory_lock(1, 9)")
	waiters(11)

	// The rows the monitor reads: every session and its mode.
	var rows []model.Lock
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := pgsource.InspectWith(ctx, admin, registry.Everywhere()) // as the dashboard under --registry builtin
		if err != nil {
			t.Fatal(err)
		}
		rows = snap.Locks
		if len(rows) >= 16 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the server, with a deadline
	}
	if len(rows) < 16 {
		t.Fatalf("the pile-up has %d rows, want 16: %+v", len(rows), rows)
	}
	var reportPID string
	for _, l := range rows {
		if l.Session().ApplicationName == "report" {
			reportPID = strconv.Itoa(int(l.PID))
		}
	}

	term := startTerminal(t, termOptions{Width: 80, Height: 24, Env: []string{"TERM=xterm-256color", "NO_COLOR=1"}},
		bin, "--registry", "builtin", "--dsn", c.DSN("postgres"), "--interval", "250ms", "--log", filepath.Join(t.TempDir(), "locktop.log"))
	shown := func(s string, l model.Lock) bool {
		pid := " " + strconv.Itoa(int(l.PID)) + " "
		for _, line := range strings.Split(s, "\n") {
			if !strings.Contains(line, pid) {
				continue
			}
			for _, m := range pileModes[l.Mode] {
				for _, f := range strings.Fields(line) {
					if f == m {
						return true
					}
				}
			}
		}
		return false
	}
	term.Expect("every session of the pile-up with its mode, the open transaction first and marked ROOT", 30*time.Second, func(s string) bool {
		for _, l := range rows {
			if !shown(s, l) {
				return false
			}
		}
		lines := strings.Split(s, "\n")
		for i, line := range lines {
			if strings.Contains(line, "KEY") && strings.Contains(line, "STATE") {
				return i+1 < len(lines) && hasLine(lines[i+1], "accounts", "ROOT", reportPID)
			}
		}
		return false
	})
	term.Keys("q")
	if code := term.AwaitExit(30 * time.Second); code != 0 {
		t.Fatalf("locktop exited with %d", code)
	}
}
