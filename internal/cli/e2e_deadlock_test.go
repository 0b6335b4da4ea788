package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
)

// TestDashboardCrossKindDeadlock builds a deadlock no server sees: process
// x holds advisory AGENT 7 and waits for a Redis session lock that process
// y holds, and y's backend waits for AGENT 7. Each process's owner id is on
// its PostgreSQL session (application_name) and its Redis locks. The
// dashboard shows the banner within two polls, and D its details.
func TestDashboardCrossKindDeadlock(t *testing.T) {
	t.Parallel() // servers and a terminal of its own: it waits beside the others
	bin := buildLocktop(t)
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	rs := redistest.Private(t)

	x := appConn(t, c, model.AppWithOwner("e2e", "proc-x"))
	y := appConn(t, c, model.AppWithOwner("e2e", "proc-y"))
	if _, err := x.Exec(ctx, "SELECT pg_advisory_lock(1, 7)"); err != nil {
		t.Fatal(err)
	}
	rx := redislock.New(redistest.ClientOf(t, rs), redislock.Options{Owner: "proc-x", TTL: time.Minute})
	ry := redislock.New(redistest.ClientOf(t, rs), redislock.Options{Owner: "proc-y", TTL: time.Minute})
	defer rx.Close()
	defer ry.Close()
	key := redislock.SessionKey("t1", "a1", "c1", "web")
	held, err := ry.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	// The two waits of the cycle, ended by the test's end.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
	go func() {
		defer func() { done <- struct{}{} }()
		if l, err := rx.Acquire(wctx, key, lockcore.Wait(time.Minute)); err == nil {
			_ = l.Release(context.Background())
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		_, _ = y.Exec(wctx, "SELECT pg_advisory_lock(1, 7)")
	}()

	term := startTerminal(t, termOptions{Width: 120, Height: 30, Env: []string{"TERM=xterm-256color", "NO_COLOR=1"}},
		bin, "--registry", "builtin", "--dsn", c.DSN("postgres"), "--redis", rs.URL(), "--interval", "250ms",
		"--log", filepath.Join(t.TempDir(), "locktop.log"))
	term.Expect("the deadlock banner", 30*time.Second, func(s string) bool {
		return strings.Contains(s, "DEADLOCK advisory+redis: owner proc-x (pid") && strings.Contains(s, "no server sees it")
	})
	term.Keys("D")
	term.Expect("the deadlock's details: each wait's kind, key, mode and since when", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "Deadlocks · 1 cycle") &&
			strings.Contains(s, "kind redis · key sesslock:t1:a1:c1:web · mode excl") &&
			strings.Contains(s, "kind advisory · key AGENT 7 · mode excl · waiting since") &&
			strings.Contains(s, "--allow-terminate")
	})
	term.Keys("esc", "q")
	if code := term.AwaitExit(30 * time.Second); code != 0 {
		t.Fatalf("locktop exited with %d", code)
	}
}
