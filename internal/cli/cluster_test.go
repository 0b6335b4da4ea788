package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// locktop cluster starts a throw-away Redis beside the PostgreSQL, names it
// in REDIS_URL and LOCKTOP_TEST_REDIS, and removes it afterwards.
func TestClusterCommandStartsRedis(t *testing.T) {
	var out, errb bytes.Buffer
	script := `test "$REDIS_URL" = "$LOCKTOP_TEST_REDIS" && redis-cli -s "${REDIS_URL#unix://}" ping && echo "$REDIS_URL"`
	if code := run([]string{"cluster", "--", "sh", "-c", script}, &out, &errb); code != exitOK {
		t.Fatalf("locktop cluster exited %d: %s %s", code, out.String(), errb.String())
	}
	lines := strings.Fields(out.String())
	if len(lines) != 2 || lines[0] != "PONG" || !strings.HasPrefix(lines[1], "unix:///") {
		t.Fatalf("output %q: want PONG and the Redis URL", out.String())
	}
	dir := filepath.Dir(strings.TrimPrefix(lines[1], "unix://"))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the throw-away Redis %s is still there (stat: %v)", dir, err)
	}
}

// Ctrl-C stops the command and removes the throw-away Redis too.
func TestClusterCommandInterrupted(t *testing.T) {
	urlFile := filepath.Join(t.TempDir(), "url")
	cmd := exec.Command(os.Args[0], "cluster", "--", "sh", "-c", `echo "$REDIS_URL" > `+urlFile+`; exec sleep 60`)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var url string
	pgtest.Eventually(t, "the command sees REDIS_URL", func() bool {
		b, _ := os.ReadFile(urlFile)
		url = strings.TrimSpace(string(b))
		return url != ""
	})
	dir := filepath.Dir(strings.TrimPrefix(url, "unix://"))
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("locktop cluster did not exit after SIGINT")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the throw-away Redis %s is still there after SIGINT (stat: %v)", dir, err)
	}
}
