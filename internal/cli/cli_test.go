package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/registry"
)

// connectingCommands are the commands that name a server; each takes the
// connection options psql and pg_activity take.
var connectingCommands = []string{"dashboard", "snapshot", "serve", "sim"}

// psqlArgs are -h/-p/-U/-d for the test database.
func psqlArgs(t *testing.T) []string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-h", cfg.Host, "-p", strconv.Itoa(int(cfg.Port)), "-U", cfg.User, "-d", cfg.Database}
}

// `snapshot -h HOST` connects to HOST, as psql and pg_activity read -h: it
// is not a request for help that exits 0 with nothing on stdout.
func TestSnapshotPsqlOptions(t *testing.T) {
	for k, v := range noDatabaseEnv() {
		t.Setenv(k, v)
	}
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 9393)"); err != nil {
		t.Fatal(err)
	}
	cfg, _ := pgconn.ParseConfig(pgtest.DSN(t))
	kv := "host=" + cfg.Host + " port=" + strconv.Itoa(int(cfg.Port)) + " user=" + cfg.User + " dbname=" + cfg.Database
	for name, args := range map[string][]string{
		"short options":     psqlArgs(t),
		"long options":      {"--host", cfg.Host, "--port=" + strconv.Itoa(int(cfg.Port)), "--username", cfg.User, "--dbname", cfg.Database},
		"URL positional":    {pgtest.DSN(t)},
		"key=value":         {kv},
		"options then URL":  {"--json", pgtest.DSN(t)},
		"URL with -U added": {"postgres:///" + cfg.Database + "?host=" + cfg.Host + "&port=" + strconv.Itoa(int(cfg.Port)), "-U", cfg.User},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, append([]string{"snapshot"}, args...)...)
			if code != exitOK || !strings.Contains(stdout, "AGENT 9393") {
				t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
	// -h names a host even when it cannot be reached: exit 2 and one line,
	// never a usage text and exit 0.
	code, stdout, stderr := runCmd(t, "snapshot", "-h", t.TempDir(), "-U", "nobody")
	if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "cannot reach") {
		t.Errorf("snapshot -h DIR: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// Connection settings given twice, or a positional argument that is no
// connection string, are bad usage.
func TestConnectionOptionConflicts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"snapshot", "postgres://a@h1/db", "-h", "h2"}, "host"},
		{[]string{"snapshot", "host=h1 dbname=x", "--dbname", "y"}, "dbname"},
		{[]string{"snapshot", "--dsn", "postgres:///x", "postgres:///y"}, "--dsn"},
		{[]string{"snapshot", "postgres:///x", "postgres:///y"}, "unexpected argument"},
		{[]string{"snapshot", "mydb"}, "-d"},
		{[]string{"snapshot", "-dsn", "postgres:///x"}, "--dsn"},
		{[]string{"serve", "-help"}, "--help"},
		// A password in a mistyped argument is not echoed.
		{[]string{"snapshot", "postgres://u:hunter7@h/db", "postgres://u:hunter7@h/db2"}, "unexpected"},
		{[]string{"snapshot", "-dsn=postgres://u:hunter7@h/db"}, "--dsn"},
		{[]string{"snapshot", "--dsn", "postgres://u:hunter7@h/db", "host=x password=hunter7"}, "twice"},
	} {
		code, stdout, stderr := runCmd(t, tc.args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "hunter7") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line with %q, no password", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// One help, listing every command, on stdout, for `locktop --help`,
// `locktop help` and `locktop -?`-less spellings alike.
func TestHelp(t *testing.T) {
	_, top, _ := runCmd(t, "--help")
	for _, args := range [][]string{{"--help"}, {"help"}, {"dashboard", "--help"}} {
		code, stdout, stderr := runCmd(t, args...)
		if code != exitOK || stderr != "" || stdout != top {
			t.Errorf("%q: exit %d, stderr %q, stdout differs from locktop --help:\n%s", args, code, stderr, stdout)
		}
	}
	for _, c := range commands {
		if !strings.Contains(top, "\n  "+c.name+" ") {
			t.Errorf("locktop --help does not list %q:\n%s", c.name, top)
		}
	}
	for _, opt := range []string{"-h, --host", "-p, --port", "-U, --username", "-d, --dbname", "--version"} {
		if !strings.Contains(top, opt) {
			t.Errorf("locktop --help does not mention %q", opt)
		}
	}
	// Every command's --help works: its usage on stdout, exit 0; cluster
	// does not run a program called --help.
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {"help", c.name}} {
			code, stdout, stderr := runCmd(t, args...)
			if code != exitOK || stderr != "" || !strings.Contains(stdout, "Usage: locktop "+c.name) || !strings.Contains(stdout, c.summary) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
			}
		}
	}
	for _, name := range connectingCommands {
		_, stdout, _ := runCmd(t, name, "--help")
		if !strings.Contains(stdout, "-h, --host") {
			t.Errorf("%s --help lacks the connection options:\n%s", name, stdout)
		}
	}
	if code, _, stderr := runCmd(t, "help", "bogus"); code != exitUsage || !strings.Contains(stderr, "bogus") {
		t.Errorf("help bogus: exit %d, %q", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, stdout, stderr := runCmd(t, args...)
		if code != exitOK || stderr != "" || !regexp.MustCompile(`^locktop \S+ \(go1\.\S+ \S+/\S+\)\n$`).MatchString(stdout) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
	prev := version
	version = "v9.8.7"
	defer func() { version = prev }()
	if _, stdout, _ := runCmd(t, "version"); !strings.HasPrefix(stdout, "locktop v9.8.7 ") {
		t.Errorf("a set version is not shown: %q", stdout)
	}
}

// An unknown flag or a bad value is one line on stderr and exit 2, for
// every command: no usage text, no second copy of the error.
func TestBadFlagsOneLine(t *testing.T) {
	asTerminal(t, true)
	for _, c := range append([]string{"dashboard"}, names()...) {
		for _, args := range [][]string{{"--no-such-flag"}, {"--interval", "abc"}} {
			if args[0] == "--interval" && c != "dashboard" && c != "serve" {
				continue
			}
			code, stdout, stderr := runCmd(t, append([]string{c}, args...)...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "locktop: ") {
				t.Errorf("%s %q: exit %d, stdout %q, stderr %q; want exit 2 and one line", c, args, code, stdout, stderr)
			}
		}
	}
}

func names() []string {
	var out []string
	for _, c := range commands {
		out = append(out, c.name)
	}
	return out
}

// A listen address that cannot be used is exit 2 in every command that
// serves, the dashboard in a terminal too.
func TestBadHTTPAddressExit2(t *testing.T) {
	asTerminal(t, true)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, addr := range []string{"192.0.2.1:9753", busy.Addr().String(), "no-port"} {
		for _, args := range [][]string{
			{"--dsn", pgtest.DSN(t), "--http", addr, "--log", t.TempDir() + "/l.log"},
			{"serve", "--dsn", pgtest.DSN(t), "--http", addr},
		} {
			code, _, stderr := runCmd(t, args...)
			if code != exitUsage || strings.Count(stderr, "\n") != 1 {
				t.Errorf("%q: exit %d, stderr %q; want 2 and one line", args, code, stderr)
			}
		}
	}
}

// `locktop key STRING` turns a string into its advisory key as seed 003's
// service takes it, with the SQL for it and the registry entry it matches.
func TestKey(t *testing.T) {
	s := "tenant-a:2025-01-15"
	id := registry.FNV1a32(s)
	code, stdout, stderr := runCmd(t, "key", s)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	ids := strconv.Itoa(int(id))
	for _, want := range []string{ids, "pg_advisory_xact_lock(" + ids + ")", "pg_advisory_lock(" + ids + ")", "BOOKING_DATE", "{tenantId}:{date}", "objsubid = 1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("key %q lacks %q:\n%s", s, want, stdout)
		}
	}
	// With --space, the two-int form lockcore.KeyFromString takes.
	_, stdout, _ = runCmd(t, "key", "--space", "7", s)
	if !strings.Contains(stdout, "pg_advisory_lock(7, "+ids+")") || !strings.Contains(stdout, "objsubid = 2") {
		t.Errorf("key --space 7:\n%s", stdout)
	}
	// A string no pattern matches says so; a key label is that key.
	if _, stdout, _ := runCmd(t, "key", "nothing-like-it"); !strings.Contains(stdout, "no registered pattern") {
		t.Errorf("unmatched:\n%s", stdout)
	}
	if _, stdout, _ := runCmd(t, "key", "AGENT 7"); !strings.Contains(stdout, "pg_advisory_lock(1, 7)") {
		t.Errorf("AGENT 7:\n%s", stdout)
	}
	if code, _, stderr := runCmd(t, "key"); code != exitUsage || strings.Count(stderr, "\n") != 1 {
		t.Errorf("no argument: exit %d, stderr %q", code, stderr)
	}
}

// README's Commands section is `locktop --help`, word for word.
func TestReadmeCommandsMatchHelp(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Commands\n")
	if !ok {
		t.Fatal("README has no Commands section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```text\n")
	if !ok {
		t.Fatal("README's Commands section has no ```text block")
	}
	block, _, _ = strings.Cut(block, "```")
	var stdout, stderr bytes.Buffer
	run([]string{"--help"}, &stdout, &stderr)
	if block != stdout.String() {
		t.Errorf("README's Commands block differs from locktop --help; paste this:\n%s", stdout.String())
	}
}

// In a real terminal the dashboard exits 2, as every other command does,
// for a server it cannot use and for a listen address it cannot use.
func TestDashboardExitCodesInTerminal(t *testing.T) {
	bin := buildLocktop(t)
	good := pgtest.Role(t, "term_pw", "right-pw-3318")
	wrong := strings.Replace(good, "right-pw-3318", "wrong-pw-3318", 1)
	log := t.TempDir() + "/l.log"
	for name, argv := range map[string][]string{
		"wrong password": {bin, "--log", log, wrong},
		"unreachable":    {bin, "--log", log, "-h", t.TempDir(), "-U", "x"},
		"foreign --http": {bin, "--log", log, "--http", "192.0.2.1:9753", pgtest.DSN(t)},
		"busy --http":    {bin, "--log", log, "--http", busyAddr(t), pgtest.DSN(t)},
	} {
		t.Run(name, func(t *testing.T) {
			tm := startTerminal(t, termOptions{Width: 100, Height: 30, Secrets: []string{"wrong-pw-3318"}}, argv...)
			if code := tm.AwaitExit(30 * time.Second); code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
		})
	}
}

// busyAddr is a loopback address something listens on until the test ends.
func busyAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}
