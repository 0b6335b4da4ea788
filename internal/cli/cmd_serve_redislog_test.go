package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// go-redis's own logger writes to the process's stderr (over the
// dashboard's screen, past --log). With a Redis that cannot be reached,
// serve's stderr carries no line of go-redis's own, and the failure to
// dial is logged through the project's logger once, not once per poll.
func TestServeRedisLogsThroughOwnLogger(t *testing.T) {
	cmd := exec.Command(os.Args[0], "serve", "--dsn", pgtest.DSN(t), "--http", "127.0.0.1:0", "--interval", "100ms",
		"--redis", "unix:///nonexistent-locktop/redis.sock")
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
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	var base string
	for base == "" && lines.Scan() {
		if m := listenLine.FindStringSubmatch(lines.Text()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("the child never listened; stderr %q", stderr.String())
	}
	// Many polls of the dead Redis (every 100ms, for 2s).
	failed := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		_, body := httpGet(t, base+"/api/locks")
		var doc httpapi.LocksDocument
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if sourceOK(doc.Sources, "redis") == "failed" {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("the Redis source never failed")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	_ = cmd.Wait()
	var own, dial int
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "redis: ") {
			own++
		}
		if strings.Contains(l, "failed to dial") {
			dial++
		}
	}
	if own > 0 || dial > 1 {
		t.Errorf("stderr has %d lines of go-redis's own logger and %d of failed dials (want 0 and at most 1):\n%s", own, dial, stderr.String())
	}
}
