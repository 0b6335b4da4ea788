package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

func TestSnapshotJSON(t *testing.T) {
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 9090) /* snapshot-json */"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"snapshot", "--json", "--advisory", "--dsn", pgtest.DSN(t)}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr %q", stderr.String())
	}
	var doc httpapi.Document
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("stdout is not the document: %v\n%s", err, stdout.String())
	}
	var raw map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"taken", "total", "locks", "held", "waiting", "connections"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("document lacks %q", f)
		}
	}
	var row *httpapi.Lock
	for i := range doc.Locks {
		if doc.Locks[i].Key == "AGENT 9090" {
			row = &doc.Locks[i]
		}
	}
	if row == nil || !row.Granted || row.PID == nil || *row.PID != int32(holder.PgConn().PID()) ||
		!strings.Contains(row.Query, "snapshot-json") || row.BlockedBy == nil || doc.Total != len(doc.Locks) {
		t.Errorf("row %+v in %s", row, stdout.String())
	}
}

func TestSnapshotText(t *testing.T) {
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 9191)"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", pgtest.DSN(t)) // no --dsn: the environment names the server
	var stdout, stderr bytes.Buffer
	if code := run([]string{"snapshot"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "KEY") || !strings.Contains(out, "AGENT 9191") || !strings.Contains(out, "holds") {
		t.Errorf("table:\n%s", out)
	}
}

// A role without pg_monitor still gets the document, and a warning on
// stderr that says what it cannot see; stdout stays pure JSON.
func TestSnapshotPlainRole(t *testing.T) {
	dsn := pgtest.Role(t, "snap_plain", "pw-snap-plain")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"snapshot", "--json", "--advisory", "--dsn", dsn}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var doc httpapi.Document
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc.Warning, "pg_monitor") || !strings.Contains(stderr.String(), "warning:") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("warning %q, stderr %q", doc.Warning, stderr.String())
	}
}

func TestSnapshotBadInput(t *testing.T) {
	wrong := wrongPasswordDSN(t)
	noDB, err := pgtest.WithDatabase(pgtest.DSN(t), "no_such_db_snap")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		args         []string
		env          map[string]string
		want, secret string
	}{
		{"no database", []string{"snapshot", "--json"}, noDatabaseEnv(), "snapshot needs a database", ""},
		{"stray argument", []string{"snapshot", "--json", "extra"}, nil, "unexpected argument", ""},
		{"unknown flag", []string{"snapshot", "--yaml"}, nil, "unknown flag: --yaml", ""},
		{"bad DSN with an option", []string{"snapshot", "-U", "x", "postgres://u:hunter2@host:notaport/db"}, nil, "bad DSN", "hunter2"},
		{"bad DSN", []string{"snapshot", "--json", "--dsn", "postgres://u:hunter2@host:notaport/db"}, nil, "bad DSN", "hunter2"},
		{"unreachable", []string{"snapshot", "--json", "--dsn", "host=" + t.TempDir() + " user=x password=hunter3 connect_timeout=2"}, nil, "cannot reach the server", "hunter3"},
		{"wrong password", []string{"snapshot", "--json", "--dsn", wrong}, nil, "authentication failed", "wrong-pw-9"},
		{"no such database", []string{"snapshot", "--json", "--dsn", noDB}, nil, "no such database", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			expectExit(t, tc.args, exitUsage, tc.want, tc.secret)
		})
	}
}

// Server strings reach the terminal without their control characters: a
// query (or a name) cannot start an escape sequence or break a row.
func TestSnapshotTextSanitizes(t *testing.T) {
	doc := httpapi.LocksDocument{Total: 1, Held: 1, Locks: []httpapi.LockDoc{{
		Kind: "advisory", Key: "AGENT 7", Database: "app\x1b[2J", Owner: "owner\x1b[1m", Mode: "ExclusiveLock", Granted: true,
		ApplicationName: "evil\x1b]0;title\x07", Query: "SELECT 1;\n\x1b[31mDROP\x1b[0m", BlockedBy: []int32{},
	}}}
	var b strings.Builder
	if err := writeTable(&b, doc); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("control characters reached the output: %q", out)
	}
	if n := strings.Count(out, "\n"); n != 4 { // summary, blank, header, one row
		t.Errorf("%d lines, want 4 (one row): %q", n, out)
	}
}

// A waiting row names the waiter's own pid as its pid, never as the
// holder: the table's column is PID, beside BLOCKED BY, and the JSON's
// holder is null on a waiting row (who holds the key is blocked_by).
func TestSnapshotWaiterIsNoHolder(t *testing.T) {
	ctx := context.Background()
	holder, waiter := pgtest.Conn(t), pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 9494)"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = waiter.Exec(wctx, "SELECT pg_advisory_lock(1, 9494)") }()
	defer func() { cancel(); <-done }()
	hpid, wpid := holder.PgConn().PID(), waiter.PgConn().PID()

	var doc httpapi.Document
	var raw struct {
		Locks []map[string]any `json:"locks"`
	}
	pgtest.Eventually(t, "the waiter shows in the snapshot", func() bool {
		code, stdout, stderr := runCmd(t, "snapshot", "--json", "--advisory", pgtest.DSN(t))
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal([]byte(stdout), &raw)
		for _, l := range doc.Locks {
			if l.Key == "AGENT 9494" && !l.Granted {
				return true
			}
		}
		return false
	})
	for i, l := range doc.Locks {
		if l.Key != "AGENT 9494" {
			continue
		}
		h, present := raw.Locks[i]["holder"]
		switch {
		case !present:
			t.Errorf("row %d has no holder field", i)
		case l.Granted && (h != strconv.Itoa(int(hpid)) || *l.PID != int32(hpid)):
			t.Errorf("holding row: holder %v, pid %v; want %d", h, *l.PID, hpid)
		case !l.Granted && (h != nil || *l.PID != int32(wpid) || len(l.BlockedBy) != 1 || l.BlockedBy[0] != int32(hpid)):
			t.Errorf("waiting row: holder %v (want null), pid %v (want %d), blocked_by %v (want [%d])", h, *l.PID, wpid, l.BlockedBy, hpid)
		}
	}

	_, table, _ := runCmd(t, "snapshot", pgtest.DSN(t))
	var header string
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "KIND") {
			header = line
		}
	}
	if strings.Contains(header, "HOLDER") || !regexp.MustCompile(`\bPID\b`).MatchString(header) || !strings.Contains(header, "BLOCKED BY") {
		t.Errorf("table header %q: want PID and BLOCKED BY, no HOLDER", header)
	}
}

// C1 controls (U+009B is CSI on many terminals), DEL and bidi overrides in
// server strings are escaped in the JSON, as \u009b and \u202e, so
// printing the document cannot drive the terminal; decoding gives the
// strings back unchanged. (The server itself replaces non-ASCII in
// application_name, so the query text carries them here.)
func TestSnapshotJSONEscapesControls(t *testing.T) {
	const marker = "\u009b31m\u202eevil\u2066\u007f"
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 9595) /* "+marker+" */"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCmd(t, "snapshot", "--json", "--advisory", pgtest.DSN(t))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, r := range []rune{0x9b, 0x202e, 0x2066, 0x7f} {
		if strings.ContainsRune(stdout, r) {
			t.Errorf("U+%04X reached the output raw", r)
		}
	}
	if !strings.Contains(stdout, `\u009b`) || !strings.Contains(stdout, `\u202e`) {
		t.Errorf("no \\u escapes in the output")
	}
	var doc httpapi.Document
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range doc.Locks {
		found = found || (l.Key == "AGENT 9595" && strings.Contains(l.Query, marker))
	}
	if !found {
		t.Errorf("the query did not decode back to its text")
	}
}

// `snapshot --json` is the /api/locks document: a SELECT ... FOR UPDATE
// waiter shows as a row lock wait, named by its relation and row, blocked
// by the transaction that holds the row; the table shows it with its kind.
func TestSnapshotShowsRowLockWaits(t *testing.T) {
	ctx := context.Background()
	admin := pgtest.Conn(t)
	if _, err := admin.Exec(ctx, `CREATE TABLE snap_turns (id int PRIMARY KEY); INSERT INTO snap_turns VALUES (1), (2)`); err != nil {
		t.Fatal(err)
	}
	holder := pgtest.Conn(t)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT * FROM snap_turns WHERE id = 2 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waiter := pgtest.Conn(t)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Exec(wctx, "SELECT * FROM snap_turns WHERE id = 2 FOR UPDATE /* row-waiter */")
	}()
	defer func() { cancel(); <-done }()

	var doc httpapi.LocksDocument
	pgtest.Eventually(t, "the row waiter shows", func() bool {
		code, out, stderr := runCmd(t, "snapshot", "--json", pgtest.DSN(t))
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		doc = httpapi.LocksDocument{}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		for _, l := range doc.Locks {
			if l.Kind == "row" && !l.Granted && strings.Contains(l.Query, "row-waiter") {
				return strings.HasPrefix(l.Key, "public.snap_turns row (") && l.Relation == "public.snap_turns" && len(l.BlockedBy) == 1
			}
		}
		return false
	})
	if len(doc.Sources) != 0 && doc.Sources[0].Name != "postgres" {
		t.Errorf("sources %+v", doc.Sources)
	}
	_, table, _ := runCmd(t, "snapshot", pgtest.DSN(t))
	if !regexp.MustCompile(`(?m)^row\s+public\.snap_turns row \(\d+,\d+\)`).MatchString(table) {
		t.Errorf("the table has no row lock line:\n%s", table)
	}
}

// A row lock queue in another database than the one snapshot connects to
// is printed with its relation's name, read in that database, in one run.
func TestSnapshotNamesOtherDatabases(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t, "lt_snap_other_"+strconv.Itoa(os.Getpid()))
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	holder := conn()
	if _, err := holder.Exec(ctx, `CREATE TABLE other_orders (id int PRIMARY KEY); INSERT INTO other_orders VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT * FROM other_orders WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waiter := conn()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = waiter.Exec(wctx, "SELECT * FROM other_orders WHERE id = 1 FOR UPDATE")
	}()
	defer func() { cancel(); <-done }()
	pgtest.Eventually(t, "the waiter waits", func() bool {
		var n int
		err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", waiter.PgConn().PID()).Scan(&n)
		return err == nil && n > 0
	})
	code, out, stderr := runCmd(t, "snapshot", pgtest.DSN(t))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^row\s+public\.other_orders row \(0,1\)\s+lt_snap_other_`).MatchString(out) {
		t.Errorf("the other database's row lock is not named:\n%s", out)
	}
}
