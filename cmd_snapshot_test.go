package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/httpapi"
	"github.com/locktop/locktop/internal/pgtest"
)

func TestSnapshotJSON(t *testing.T) {
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 9090) /* snapshot-json */"); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"snapshot", "--json", "--dsn", pgtest.DSN(t)}, &stdout, &stderr); code != exitOK {
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
	if code := run([]string{"snapshot", "--json", "--dsn", dsn}, &stdout, &stderr); code != exitOK {
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
		{"unknown flag", []string{"snapshot", "--yaml"}, nil, "flag provided but not defined", ""},
		{"bad DSN", []string{"snapshot", "--json", "--dsn", "postgres://u:hunter2@host:notaport/db"}, nil, "bad DSN", "hunter2"},
		{"unreachable", []string{"snapshot", "--json", "--dsn", "host=" + t.TempDir() + " user=x password=hunter3 connect_timeout=2"}, nil, "cannot reach the server", "hunter3"},
		{"wrong password", []string{"snapshot", "--json", "--dsn", wrong}, nil, "authentication failed", "wrong-pw-9"},
		{"no such database", []string{"snapshot", "--json", "--dsn", noDB}, nil, "no such database", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if tc.name == "unknown flag" {
				// The flag package prints its usage too; only the exit code
				// and the last line are ours.
				var stdout, stderr bytes.Buffer
				if code := run(tc.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
					t.Errorf("exit %d, stderr %q", code, stderr.String())
				}
				return
			}
			expectExit(t, tc.args, exitUsage, tc.want, tc.secret)
		})
	}
}

// Server strings reach the terminal without their control characters: a
// query (or a name) cannot start an escape sequence or break a row.
func TestSnapshotTextSanitizes(t *testing.T) {
	doc := httpapi.Document{Total: 1, Held: 1, Locks: []httpapi.Lock{{
		Key: "AGENT 7", Database: "app\x1b[2J", Holder: "42", Mode: "ExclusiveLock", Granted: true,
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
