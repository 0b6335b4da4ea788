package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// syncBuffer is a bytes.Buffer safe to write from a command while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listenLine = regexp.MustCompile(`listening on (http://\S+)`)

// waitURL waits for the serve command to print where it listens.
func waitURL(t *testing.T, out *syncBuffer, errc <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listenLine.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-errc:
			t.Fatalf("serve ended before listening: %v; output %q", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never said where it listens; output %q", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// serve end to end, in process: it listens on a port of its own choosing,
// says where, serves all three endpoints, and stops cleanly when its
// context ends.
func TestServe(t *testing.T) {
	dsn := pgtest.DSN(t)
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 8080)"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runServe(ctx, []string{"--dsn", dsn, "--http", "127.0.0.1:0", "--interval", "100ms"}, &stdout, &stderr)
	}()
	base := waitURL(t, &stdout, errc)

	code, body := httpGet(t, base+"/api/advisory-locks")
	var doc httpapi.Document
	if err := json.Unmarshal(body, &doc); err != nil || code != http.StatusOK {
		t.Fatalf("/api/advisory-locks: %d %s (%v)", code, body, err)
	}
	found := false
	for _, l := range doc.Locks {
		found = found || (l.Key == "AGENT 8080" && l.Granted)
	}
	if !found || doc.Total != len(doc.Locks) {
		t.Errorf("AGENT 8080 not in the document: %s", body)
	}
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	// The poll loop feeds the snapshot gauges without any request for the
	// lock table.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := httpGet(t, base+"/metrics")
		text := string(body)
		if strings.Contains(text, `locktop_snapshot_locks_held{database=`) && strings.Contains(text, `locktop_pool_max_connections{pool="monitor"} 2`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot or pool gauges in /metrics:\n%s", text)
		}
		time.Sleep(20 * time.Millisecond)
	}

	cancel()
	if err := <-errc; err != nil {
		t.Errorf("serve: %v", err)
	}
	if !strings.Contains(stdout.String(), "locktop serve: stopped") {
		t.Errorf("stdout %q", stdout.String())
	}
	if s := stderr.String(); s != "" {
		t.Errorf("stderr %q", s)
	}
}

// The real command in a child process stops cleanly, exit code 0, on SIGINT
// and on SIGTERM.
func TestServeStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "serve", "--dsn", pgtest.DSN(t), "--http", "127.0.0.1:0")
			// atexit_sleep_ms: a race-enabled child would otherwise linger a
			// second after exiting.
			cmd.Env = append(os.Environ(), envRunMain+"=1", "GORACE=atexit_sleep_ms=0")
			var stderr syncBuffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(out)
			var base string
			for base == "" && lines.Scan() {
				if m := listenLine.FindStringSubmatch(lines.Text()); m != nil {
					base = m[1]
				}
			}
			if base == "" {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the child never listened; stderr %q", stderr.String())
			}
			if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK {
				t.Errorf("/healthz: %d %s", code, body)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var rest strings.Builder
			for lines.Scan() {
				rest.WriteString(lines.Text() + "\n")
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("after %s: %v; stderr %q", sig, err, stderr.String())
			}
			if !strings.Contains(rest.String(), "locktop serve: stopped") {
				t.Errorf("after %s the child printed %q", sig, rest.String())

			}
		})
	}
}

// Bad input: one line on stderr, exit code 2, no password echoed.
func TestServeBadInput(t *testing.T) {
	wrong := wrongPasswordDSN(t)
	for _, tc := range []struct {
		name   string
		args   []string
		env    map[string]string
		want   string
		secret string
	}{
		{"no database", []string{"serve"}, noDatabaseEnv(), "serve needs a database", ""},
		{"bad address", []string{"serve", "--dsn", pgtest.DSN(t), "--http", "localhost"}, nil, "bad listen address", ""},
		{"short interval", []string{"serve", "--dsn", pgtest.DSN(t), "--interval", "1ms"}, nil, "too short", ""},
		{"bad DSN", []string{"serve", "--http", "127.0.0.1:0", "--dsn", "postgres://u:hunter2@host:notaport/db"}, nil, "bad DSN", "hunter2"},
		{"unreachable", []string{"serve", "--http", "127.0.0.1:0", "--dsn", "host=" + t.TempDir() + " user=x password=hunter3 connect_timeout=2"}, nil, "cannot reach the server", "hunter3"},
		{"wrong password", []string{"serve", "--http", "127.0.0.1:0", "--dsn", wrong}, nil, "authentication failed", "wrong-pw-9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			expectExit(t, tc.args, exitUsage, tc.want, tc.secret)
		})
	}
}

// noDatabaseEnv clears every variable that names a server.
func noDatabaseEnv() map[string]string {
	env := map[string]string{"DATABASE_URL": ""}
	for _, v := range pgEnv {
		env[v] = ""
	}
	return env
}

func wrongPasswordDSN(t *testing.T) string {
	t.Helper()
	pgtest.Role(t, "cmd_pw_role", "right-pw-9")
	wrong, err := pgtest.WithUser(pgtest.DSN(t), "cmd_pw_role", "wrong-pw-9")
	if err != nil {
		t.Fatal(err)
	}
	return wrong
}

// expectExit runs locktop with args and checks the exit code and that stderr
// is one line containing want and not secret.
func expectExit(t *testing.T, args []string, code int, want, secret string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	got := run(args, &stdout, &stderr)
	msg := stderr.String()
	if got != code {
		t.Errorf("exit code %d, want %d; stderr %q", got, code, msg)
	}
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, want) || (secret != "" && strings.Contains(msg, secret)) {
		t.Errorf("stderr %q: want one line containing %q and no password", msg, want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
}
