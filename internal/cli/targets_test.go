package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/model"
)

// Targets from a pg_service.conf service, a URL and a --config file all
// reach their server, and each lock names its own: snapshot's table leads
// with SERVER, its JSON gives every lock its server, and each source is
// named after its target.
func TestSnapshotSeveralTargets(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	svc := filepath.Join(dir, "pg_service.conf")
	if err := os.WriteFile(svc, fmt.Appendf(nil, "[lockdb]\nhost=%s\nport=%d\nuser=%s\ndbname=%s\n", cfg.Host, cfg.Port, cfg.User, cfg.Database), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGSERVICEFILE", svc)
	rs := redistest.Private(t)
	conf := filepath.Join(dir, "targets.yml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "source_timeout: 3s\ntargets:\n  - name: fromfile\n    conninfo: %q\n    redis: %s\n", dsn, rs.URL()), 0o600); err != nil {
		t.Fatal(err)
	}
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 9393)"); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	args := []string{"snapshot", "--config", conf, "--target", "svc=service=lockdb"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	if !strings.Contains(out, "\nSERVER ") || !hasLine(out, "fromfile", "AGENT 9393") || !hasLine(out, "svc", "AGENT 9393") {
		t.Errorf("table of two targets on one server: each its own row of AGENT 9393, under SERVER:\n%s", out)
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(append(args, "--json"), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var doc httpapi.LocksDocument
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	servers := map[string]bool{}
	for _, l := range doc.Locks {
		if l.Key == "AGENT 9393" {
			servers[l.Server] = true
			if !strings.HasPrefix(l.Source, l.Server+"/") {
				t.Errorf("lock of %s from source %q", l.Server, l.Source)
			}
		}
	}
	if !servers["fromfile"] || !servers["svc"] || len(servers) != 2 {
		t.Errorf("AGENT 9393's servers %v, want fromfile and svc", servers)
	}
	var names []string
	for _, s := range doc.Sources {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "fromfile/postgres,fromfile/redis,fromfile/lease,svc/postgres,svc/lease" {
		t.Errorf("sources %s", got)
	}
}

// Bad targets: one line, exit 2, never a password.
func TestTargetsBadInput(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("PGSERVICEFILE", file("empty.conf", "[other]\nhost=/nowhere\n"))
	for _, tc := range []struct {
		name         string
		args         []string
		want, secret string
	}{
		{"no name", []string{"snapshot", "--target", "host=/tmp"}, "the target's name comes first", ""},
		{"a URL, no name", []string{"snapshot", "--target", "postgres://u:hunter4@db/x"}, "give NAME=CONNINFO", "hunter4"},
		{"no conninfo", []string{"snapshot", "--target", "a="}, "give NAME=CONNINFO", ""},
		{"bad name", []string{"snapshot", "--target", "a/b=host=/tmp"}, "a target's name (before the first '=')", ""},
		{"a URL with a query, no name", []string{"snapshot", "--target", "postgres://u:hunter5@db/x?sslmode=disable"}, "a target's name", "hunter5"},
		{"twice", []string{"snapshot", "--target", "a=host=/tmp", "--target", "a=host=/tmp"}, "target \"a\" is named twice", ""},
		{"bad DSN", []string{"snapshot", "--target", "a=postgres://u:hunter2@host:notaport/db"}, "target a: bad DSN", "hunter2"},
		{"no such service", []string{"serve", "--target", "a=service=nosuch"}, "target a: bad DSN", ""},
		{"with a conninfo", []string{"record", "--out", filepath.Join(dir, "x.rec"), "--target", "a=host=/tmp", "host=/tmp"}, "both name servers", ""},
		{"no config", []string{"serve", "--config", filepath.Join(dir, "none.yml")}, "--config: open", ""},
		{"config typo", []string{"snapshot", "--config", file("typo.yml", "targets:\n  - name: a\n    conninfo: host=/tmp\n    rediss: x\n")}, "field rediss not found", ""},
		{"config empty", []string{"snapshot", "--config", file("empty.yml", "source_timeout: 2s\n")}, "no targets", ""},
		{"config timeout", []string{"snapshot", "--config", file("t.yml", "source_timeout: soon\ntargets:\n  - name: a\n    conninfo: host=/tmp\n")}, "source_timeout \"soon\"", ""},
		{"config no conninfo", []string{"snapshot", "--config", file("nc.yml", "targets:\n  - name: a\n")}, "has no conninfo", ""},
		{"config max_connections", []string{"snapshot", "--config", file("mc.yml", "targets:\n  - name: a\n    conninfo: host=/tmp\n    max_connections: 0\n")}, "target 1 (\"a\"): max_connections 0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { expectExit(t, tc.args, exitUsage, tc.want, tc.secret) })
	}
}

// record of several targets: one file, each source named after its
// target, each lock carrying its target's name; report names each key's
// server.
func TestRecordSeveralTargets(t *testing.T) {
	ctx := context.Background()
	holder, waiter := pgtest.Conn(t), pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 9494)"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = waiter.Exec(wctx, "SELECT pg_advisory_lock(1, 9494)") }()
	t.Cleanup(func() { cancel(); <-done })

	path := filepath.Join(t.TempDir(), "fleet.rec")
	var stdout, stderr bytes.Buffer
	dsn := pgtest.DSN(t)
	args := []string{"record", "--out", path, "--interval", "200ms", "--duration", "1500ms", "--target", "x=" + dsn, "--target", "y=" + dsn}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	r, err := recording.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Header.Sources, ","); got != "x/postgres,x/lease,y/postgres,y/lease" {
		t.Errorf("recorded sources %s", got)
	}
	snaps, err := r.At(r.Len() - 1)
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]int{}
	for i, s := range snaps {
		for _, l := range s.Locks {
			if l.KeyLabel() == "AGENT 9494" {
				servers[l.Server]++
				if want, _ := model.SplitSource(r.Header.Sources[i]); l.Server != want {
					t.Errorf("a lock of source %s carries server %q", r.Header.Sources[i], l.Server)
				}
			}
		}
	}
	if servers["x"] != 2 || servers["y"] != 2 {
		t.Errorf("AGENT 9494's rows by server %v, want a holder and a waiter of x and of y", servers)
	}
	stdout.Reset()
	if code := run([]string{"report", path}, &stdout, &stderr); code != exitOK {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "x: AGENT 9494") || !strings.Contains(out, "y: AGENT 9494") {
		t.Errorf("the report does not name each key's server:\n%s", out)
	}
}

// max_connections bounds every target of a --config file, or one target
// of its own; without it a target has no bound beyond the monitor's pool.
func TestTargetFileMaxConnections(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.yml")
	body := "max_connections: 3\ntargets:\n  - name: a\n    conninfo: host=/tmp\n  - name: b\n    conninfo: host=/tmp\n    max_connections: 1\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := readTargetFile(p, SourceConfig{})
	if err != nil || len(ts) != 2 || ts[0].MaxConns != 3 || ts[1].MaxConns != 1 {
		t.Fatalf("targets %+v, err %v; want a bounded to 3, b to 1", ts, err)
	}
	if err := os.WriteFile(p, []byte("targets:\n  - name: a\n    conninfo: host=/tmp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ts, err = readTargetFile(p, SourceConfig{}); err != nil || ts[0].MaxConns != 0 {
		t.Fatalf("targets %+v, err %v; want no bound", ts, err)
	}
}
