package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// runCmd runs locktop in process and returns its exit code and output.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// asTerminal makes the dashboard believe it has a terminal, for the checks
// that come before it draws anything.
func asTerminal(t *testing.T, yes bool) {
	t.Helper()
	prev := isTerminal
	isTerminal = func(*os.File) bool { return yes }
	t.Cleanup(func() { isTerminal = prev })
}

func TestDashboardWithoutTerminal(t *testing.T) {
	asTerminal(t, false)
	for _, args := range [][]string{nil, {"--dsn", "postgres:///nowhere"}} {
		code, _, stderr := runCmd(t, args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 ||
			!strings.Contains(stderr, "locktop snapshot --json") || !strings.Contains(stderr, "locktop sim --headless") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestDashboardUsageErrors(t *testing.T) {
	asTerminal(t, true)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "no-port-here"}, "bad listen address"},
		{[]string{"--interval", "10ms"}, "at least 100ms"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"--dsn", "postgres:///x", "--log", "/proc/no/such/dir/x.log"}, "--log"},
		{[]string{"stray"}, "unknown command"},
		// Checked before anything starts (no throw-away server for a typo).
		{[]string{"--scenario", "nonsense"}, "unknown scenario"},
		{[]string{"--dsn", "postgres:///x", "--scenario", "steady"}, "add --sim"},
	} {
		code, _, stderr := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// A server that cannot be used is exit 2 and one line, without the
// password, on the screen and in the log.
func TestDashboardBadServer(t *testing.T) {
	asTerminal(t, true)
	good := pgtest.Role(t, "dash_pw", "right-pw-5521")
	wrong := strings.Replace(good, "right-pw-5521", "wrong-pw-9917", 1)
	logFile := filepath.Join(t.TempDir(), "l.log")
	for _, tc := range []struct {
		name, dsn, secret, want string
	}{
		{"bad DSN", "postgres://u:hunter2x@host:notaport/db", "hunter2x", "invalid port"},
		{"wrong password", wrong, "wrong-pw-9917", "authentication failed"},
		{"unreachable", "host=" + t.TempDir() + " user=x password=sekr1t-pw connect_timeout=2", "sekr1t-pw", "cannot reach"},
	} {
		code, _, stderr := runCmd(t, "--dsn", tc.dsn, "--log", logFile)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, tc.secret) {
			t.Errorf("%s: exit %d, stderr %q", tc.name, code, stderr)
		}
		log, _ := os.ReadFile(logFile)
		if strings.Contains(string(log), tc.secret) {
			t.Errorf("%s: the password is in the log:\n%s", tc.name, log)
		}
	}
}

func TestRedactor(t *testing.T) {
	r := newRedactor("postgres://me:pa55-word@db.example:6432/app?sslmode=disable")
	err := exitError{code: exitUsage, err: errors.New("failed: password pa55-word rejected")}
	got := r.err(err)
	var ee exitError
	if strings.Contains(got.Error(), "pa55-word") || !errors.As(got, &ee) || ee.code != exitUsage || !errors.Is(got, err.err) {
		t.Errorf("redacted %q (%T)", got, got)
	}
	if tg := r.target(); tg != "me@db.example:6432/app" {
		t.Errorf("target %q", tg)
	}
	kv := newRedactor(`host=/tmp user=me password='it\'s secret' dbname=app`)
	if kv.password == "" || strings.Contains(kv.text("x it's secret y"), "secret") {
		t.Errorf("keyword/value password %q", kv.password)
	}
	t.Setenv("PGPASSWORD", "from-the-env-77")
	env := newRedactor("host=/tmp user=me dbname=app")
	if env.text("was from-the-env-77") != "was xxxxx" {
		t.Errorf("PGPASSWORD not redacted: %q", env.text("was from-the-env-77"))
	}
	if newRedactor("postgres:///app").err(nil) != nil {
		t.Error("nil error redacted into something")
	}
}

// redactingSource never lets a poll's error carry the password.
func TestRedactingSource(t *testing.T) {
	src := redactingSource{failing{errors.New("conn to me:pw-1234@host failed")}, newRedactor("postgres://me:pw-1234@host/db")}
	_, err := src.Poll(context.Background())
	if err == nil || strings.Contains(err.Error(), "pw-1234") {
		t.Errorf("poll error %v", err)
	}
}

type failing struct{ err error }

func (f failing) Poll(context.Context) (model.Snapshot, error) { return model.Snapshot{}, f.err }
func (f failing) Info() model.ServerInfo                       { return model.ServerInfo{} }

var _ ui.Source = failing{}
