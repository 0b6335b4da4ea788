package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// simResult is one headless run's exit code and output.
type simResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// runSimAsync runs locktop sim with args on a goroutine.
func runSimAsync(t *testing.T, args ...string) <-chan simResult {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	ch := make(chan simResult, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		start := time.Now()
		code := run(append([]string{"sim", "--headless"}, args...), &stdout, &stderr)
		ch <- simResult{code, stdout.String(), stderr.String(), time.Since(start)}
	}()
	return ch
}

func waitSim(t *testing.T, ch <-chan simResult, within time.Duration) simResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("locktop sim still running after %s", within)
		return simResult{}
	}
}

// waitRows waits until the simulator has written to its schema on dsn.
func waitRows(t *testing.T, dsn, schema string) {
	t.Helper()
	pgtest.Eventually(t, "the simulator writes", func() bool {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return false
		}
		defer conn.Close(context.Background())
		var n int
		err = conn.QueryRow(context.Background(), fmt.Sprintf("SELECT count(*) FROM %s.rmw_log", schema)).Scan(&n)
		return err == nil && n > 20
	})
}

// locktop sim across a server restart keeps running until its duration
// ends and exits 0; against a server that does not come back within the
// lock timeout it exits 2 with one line. The test has a server of its own.
func TestSimAndTheServerGoingAway(t *testing.T) {
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("a server of the test's own: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	dsn := c.DSN("postgres")

	t.Run("restart", func(t *testing.T) {
		// 10s: the restart's errors outside its window (the connections
		// cut before the watch sees the server down) are a fixed few,
		// which a loaded machine's fewer attempts in 6s made 6% (seen at
		// load 7, against the run's 5%).
		ch := runSimAsync(t, "--dsn", dsn, "--schema", "restart_run", "--scenario", "steady", "--duration", "10s")
		waitRows(t, dsn, "restart_run")
		if err := c.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		r := waitSim(t, ch, 60*time.Second)
		if r.code != exitOK || r.took < 10*time.Second {
			t.Errorf("exit %d after %s; want 0 after the whole 10s; stderr %q; stdout:\n%s", r.code, r.took.Round(time.Millisecond), r.stderr, r.stdout)
		}
	})

	t.Run("gone", func(t *testing.T) {
		ch := runSimAsync(t, "--dsn", dsn, "--schema", "gone_run", "--scenario", "config-race", "--duration", "10m", "--lock-timeout", "1s")
		waitRows(t, dsn, "gone_run")
		if err := c.Stop(); err != nil {
			t.Fatal(err)
		}
		r := waitSim(t, ch, 60*time.Second)
		last := strings.TrimSpace(r.stderr)
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		if r.code != exitUsage || !strings.Contains(last, "did not come back within 1s") || strings.TrimSpace(r.stdout) != "" {
			t.Errorf("exit %d; stderr %q; stdout %q; want 2 and one line saying the server did not come back", r.code, r.stderr, r.stdout)
		}
	})
}

// mute listens where a PostgreSQL server would and accepts connections,
// but never answers. It returns a DSN for it, and a channel that receives
// once per connection accepted.
func mute(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return "postgres://nobody@/nodb?host=" + dir, accepted
}

// A server that accepts connections and never answers: locktop sim gives
// up on its own (as snapshot does, after 5s) with exit 2, and stops at once
// on SIGTERM.
func TestSimMuteServer(t *testing.T) {
	dsn, accepted := mute(t)
	t.Run("gives up", func(t *testing.T) {
		r := waitSim(t, runSimAsync(t, "--dsn", dsn, "--duration", "1s"), 60*time.Second)
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("exit %d, stderr %q; want 2 and one line", r.code, r.stderr)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "sim", "--headless", "--dsn", dsn+"&connect_timeout=60", "--duration", "1s")
		cmd.Env = append(os.Environ(), envRunMain+"=1", "GORACE=atexit_sleep_ms=0", "TMPDIR="+t.TempDir())
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for len(accepted) > 0 { // those of the subtest before
			<-accepted
		}
		select { // it has connected, and waits for an answer
		case <-accepted:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("the child never connected; stderr %q", stderr.String())
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("still running 20s after SIGTERM; stderr %q", stderr.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != exitUsage {
			t.Errorf("exit %d after SIGTERM, want 2; stderr %q", code, stderr.String())
		}
	})
}
