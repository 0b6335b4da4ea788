package pgcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartServeStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	dir := c.Dir()
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()

	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	for setting, want := range map[string]string{
		"listen_addresses":          "",
		"fsync":                     "off",
		"max_locks_per_transaction": "256",
		"max_connections":           "400",
		"unix_socket_directories":   c.SocketDir(),
	} {
		var got string
		if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatalf("%s: %v", setting, err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	var owner string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&owner); err != nil || owner != Superuser {
		t.Errorf("current_user = %q, %v; want %q", owner, err, Superuser)
	}
	conn.Close(ctx)

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	if c.Running() {
		t.Error("server still running after Stop")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there after Stop (stat: %v)", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestFindBin(t *testing.T) {
	dir, err := FindBin()
	if err != nil {
		t.Fatalf("FindBin: %v", err)
	}
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(dir + "/" + name); err != nil {
			t.Errorf("%s not in %s: %v", name, dir, err)
		}
	}
}

func TestFindBinMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := binGlob
	binGlob = "/nonexistent/*/bin"
	defer func() { binGlob = old }()
	if _, err := FindBin(); err != ErrNoServer {
		t.Fatalf("FindBin with no binaries: err = %v, want ErrNoServer", err)
	}
}

// A start-up that fails (here: a setting the server rejects) leaves no
// server running and no directory behind.
func TestFailedStartCleansUp(t *testing.T) {
	// A temporary directory of its own: other test packages start clusters
	// in the shared one meanwhile. The postgres user must reach into it.
	tmp := t.TempDir() // $TMPDIR/TestName.../001, both made 0700
	for _, d := range []string{filepath.Dir(tmp), tmp} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
	if tempBase() != tmp {
		t.Fatalf("clusters would go to %s, not the test's %s", tempBase(), tmp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Settings: map[string]string{"no_such_setting_here": "1"}})
	if err == nil {
		c.Stop()
		t.Fatal("Start with a bad setting succeeded")
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "locktop-pg-*"))
	if len(left) != 0 {
		t.Errorf("failed start left %v behind", left)
	}
}

// A cluster directory whose locktop was killed (kill -9: no Stop ran) is
// removed by the next Start at once, not once it is minutes old.
func TestStartSweepsDirectoryOfKilledOwner(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	owner := cmd.Process.Pid
	left := filepath.Join(tempBase(), dirPrefix+"killed-owner-test")
	if err := os.MkdirAll(filepath.Join(left, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(left)
	if err := os.WriteFile(filepath.Join(left, ".locktop-owner"), []byte(strconv.Itoa(owner)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill() // kill -9 of the owner
	_ = cmd.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Stop()
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the killed owner's directory %s is still there (%v)", left, err)
	}
}

// Restart ends every session (a fast shutdown) and brings the server back
// on the same socket and data.
func TestRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Stop()
	before, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close(ctx)
	if _, err := before.Exec(ctx, "CREATE TABLE kept (x int)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := before.Ping(ctx); err == nil {
		t.Fatal("a session from before the restart still answers")
	}
	after, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect after restart: %v", err)
	}
	defer after.Close(ctx)
	if _, err := after.Exec(ctx, "SELECT * FROM kept"); err != nil {
		t.Fatalf("data from before the restart: %v", err)
	}
	if !c.Running() {
		t.Fatal("Running is false after Restart")
	}
}

// Crash ends the server without a shutdown checkpoint, and the restart
// recovers from the WAL: a commit that was flushed survives, and the server
// log says it recovered.
func TestCrash(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Stop()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Crash(ctx); err != nil {
		t.Fatalf("Crash: %v", err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("a session from before the crash still answers")
	}
	conn.Close(ctx)
	after, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect after the crash: %v", err)
	}
	defer after.Close(ctx)
	var n int
	if err := after.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 1 {
		t.Fatalf("a flushed commit after the crash: %d rows, %v", n, err)
	}
	log, _ := os.ReadFile(filepath.Join(c.Dir(), "server.log"))
	if !strings.Contains(string(log), "not properly shut down") {
		t.Errorf("the server log does not show a crash recovery: %s", c.logTail())
	}
}

// The movable clock moves the server's clock forward at once, for a
// session already open and for one opened after.
func TestAdvanceClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{MovableClock: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Stop()
	connect := func() *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return conn
	}
	ahead := func(conn *pgx.Conn) time.Duration {
		t.Helper()
		var ts time.Time
		if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&ts); err != nil {
			t.Fatal(err)
		}
		return time.Until(ts)
	}
	open := connect()
	if d := ahead(open); d < -time.Second || d > time.Second {
		t.Fatalf("before AdvanceClock the server's clock is %v ahead of ours", d)
	}
	for range 2 {
		if err := c.AdvanceClock(time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for name, conn := range map[string]*pgx.Conn{"open before": open, "opened after": connect()} {
		if d := ahead(conn); d < 2*time.Minute-time.Second || d > 2*time.Minute+time.Second {
			t.Errorf("a session %s two AdvanceClock(1m): the server's clock is %v ahead of ours, want 2m", name, d)
		}
	}
	if err := c.AdvanceClock(-time.Second); err == nil {
		t.Error("AdvanceClock(-1s) moved the clock back")
	}
	if err := (&Cluster{}).AdvanceClock(time.Second); err == nil {
		t.Error("AdvanceClock without MovableClock did not fail")
	}
}

// Two clusters started at once from the template (which either may have
// to make) each run on a data directory of their own.
func TestTemplate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var cs [2]*Cluster
	errs := make(chan error, len(cs))
	for i := range cs {
		go func() {
			var err error
			cs[i], err = Start(ctx, Options{Template: true})
			errs <- err
		}()
	}
	for range cs {
		if err := <-errs; err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	for _, c := range cs {
		t.Cleanup(func() { c.Stop() })
	}
	if _, err := os.Stat(filepath.Join(tempBase(), templatePrefix+cs[0].templateID(), "data", "PG_VERSION")); err != nil {
		t.Fatalf("no template kept: %v", err)
	}
	a, err := pgx.Connect(ctx, cs[0].DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	b, err := pgx.Connect(ctx, cs[1].DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	var n int
	if err := b.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the second cluster sees the first's table (%d, %v): they share a data directory", n, err)
	}
}
