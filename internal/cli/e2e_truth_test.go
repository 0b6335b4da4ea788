package cli

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// The operator's cases of issue 20, on the real screen in tmux:
//   - the DDL pile-up: a transaction that read public.orders runs a long
//     statement, an ALTER TABLE queues behind it, three SELECTs behind the
//     ALTER. The culprit's line shows a held time no smaller than the
//     ALTER's wait, and its transaction's age ("in tx");
//   - the upgrade: A and B hold AGENT 5 shared, B asks for it exclusively.
//     B's waiting line names A alone as its blocker, not B itself.
func TestDashboardDDLPileUpAndUpgrade(t *testing.T) {
	t.Parallel() // servers and a terminal of its own: it waits beside the others
	bin := buildLocktop(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	conn := func(app string) (*pgx.Conn, string) {
		t.Helper()
		cn := appConn(t, c, app)
		var pid int32
		if err := cn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return cn, strconv.Itoa(int(pid))
	}
	// background runs sql on cn until the test ends.
	background := func(cn *pgx.Conn, sql string) {
		bctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = cn.Exec(bctx, sql)
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	admin, _ := conn("e2e.admin")
	waitsForLock := func(pid string) bool {
		var w bool
		if err := admin.QueryRow(ctx, "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1::int", pid).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	awaitWaiting := func(pid string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !waitsForLock(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s never waited", pid)
			}
		}
	}
	if _, err := admin.Exec(ctx, "CREATE TABLE orders (id int)"); err != nil {
		t.Fatal(err)
	}

	rep, repPID := conn("reporting")
	if _, err := rep.Exec(ctx, "BEGIN; SELECT count(*) FROM orders"); err != nil {
		t.Fatal(err)
	}
	background(rep, "SELECT count(*), pg_sleep(600) FROM orders")
	mig, migPID := conn("migration")
	background(mig, "ALTER TABLE orders ADD COLUMN note text")
	awaitWaiting(migPID)
	for i := range 3 {
		s, pid := conn("select-" + strconv.Itoa(i+1))
		background(s, "SELECT * FROM orders")
		awaitWaiting(pid)
	}

	a, aPID := conn("upgrade-a")
	if _, err := a.Exec(ctx, "SELECT pg_advisory_lock_shared(1, 5)"); err != nil {
		t.Fatal(err)
	}
	b, bPID := conn("upgrade-b")
	if _, err := b.Exec(ctx, "SELECT pg_advisory_lock_shared(1, 5)"); err != nil {
		t.Fatal(err)
	}
	background(b, "SELECT pg_advisory_lock(1, 5)")
	awaitWaiting(bPID)

	// The ALTER has waited a while before locktop starts: a held time
	// counted from locktop's first sight would read less.
	time.Sleep(2 * time.Second) // the wait being measured, not a synchronisation
	term := startTerminal(t, termOptions{Width: 160, Height: 40},
		bin, "--registry", "builtin", "--dsn", c.DSN("postgres"), "--interval", "250ms", "--log", filepath.Join(t.TempDir(), "locktop.log"))

	dur := regexp.MustCompile(`(≥)?([0-9][0-9.]*(?:ms|s|m[0-9]{2}s|h[0-9]{2}m))`)
	timeOf := func(line string, held bool) (time.Duration, bool) {
		for _, m := range dur.FindAllStringSubmatch(line, -1) {
			if (m[1] != "") == held {
				d, err := time.ParseDuration(m[2])
				return d, err == nil
			}
		}
		return 0, false
	}
	lineOf := func(s string, parts ...string) string {
		for _, l := range strings.Split(s, "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(l, p)
			}
			if all {
				return l
			}
		}
		return ""
	}
	term.Await("the DDL pile-up and the upgrade", 30*time.Second, func(s string) bool {
		h := lineOf(s, "public.orders", "ROOT", repPID, "reporting")
		w := lineOf(s, "waits #1", migPID, "migration", repPID)
		up := lineOf(s, "waits #1", bPID, "upgrade-b")
		return h != "" && w != "" && up != "" && hasLine(s, "waits #2", "select-1", migPID) && hasLine(s, "waits #4", "select-3")
	})
	s := term.Screen()
	h := lineOf(s, "public.orders", "ROOT", repPID, "reporting")
	w := lineOf(s, "waits #1", migPID, "migration", repPID)
	held, ok1 := timeOf(h, true)
	waited, ok2 := timeOf(w, false)
	if !ok1 || !ok2 || held < waited || waited < 2*time.Second {
		t.Errorf("the culprit reads held %v against the ALTER's wait of %v:\n%s", held, waited, s)
	}
	if !strings.Contains(h, "in tx ") {
		t.Errorf("the culprit's line does not show its transaction's age:\n%s", h)
	}
	up := lineOf(s, "waits #1", bPID, "upgrade-b")
	if strings.Count(up, bPID) != 1 || !strings.Contains(up, aPID) {
		t.Errorf("B's waiting line should name A (%s) alone as its blocker:\n%s", aPID, up)
	}
	term.Keys("q")
	if code := term.AwaitExit(10 * time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
}
