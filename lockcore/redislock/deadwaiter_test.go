package redislock

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// lockKind is one kind of the lock family as the cases that apply to every
// kind see it: how to take a key, how to see that someone waits for it,
// and how to start another process that waits for it. The cases below are
// written against it alone, so the family's conformance suite (issue 24)
// can run them for every kind from a table.
type lockKind struct {
	name string
	// bound is the documented longest time a waiter that died while queued
	// can keep the key from the others.
	bound time.Duration
	// acquire takes key, waiting up to wait (0: a single try), and returns
	// the function that releases it.
	acquire func(ctx context.Context, key string, wait time.Duration) (release func(context.Context) error, err error)
	// waiting reports how many waiters key has.
	waiting func(ctx context.Context, key string) (int, error)
	// waiter returns a command that runs a process which waits for key
	// (for a long time) and never gives up by itself.
	waiter func(key string) *exec.Cmd
}

// testDeadWaiter: a waiter process killed with SIGKILL while queued never
// keeps the key past the kind's bound. The holder releases right after the
// kill, so the dead waiter is first in line when the key is handed on.
func testDeadWaiter(t *testing.T, k lockKind) {
	ctx := context.Background()
	const key = "dead-waiter"
	release, err := k.acquire(ctx, key, 0)
	if err != nil {
		t.Fatalf("%s: holder: %v", k.name, err)
	}
	cmd := k.waiter(key)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	pgtest.Eventually(t, "the waiter process is queued", func() bool {
		n, err := k.waiting(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no clean-up of any kind
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	if err := release(ctx); err != nil {
		t.Fatalf("%s: release: %v", k.name, err)
	}
	// A live waiter gets the key within the bound (and a second to poll and
	// answer); a wait that long must not end empty.
	start := time.Now()
	rel, err := k.acquire(ctx, key, k.bound+time.Second)
	if err != nil {
		t.Fatalf("%s: the key stayed blocked by a dead waiter for over %v (the bound is %v): %v",
			k.name, time.Since(start).Round(time.Millisecond), k.bound, err)
	}
	t.Logf("%s: a live waiter got the key %v after the release", k.name, time.Since(start).Round(time.Millisecond))
	if err := rel(ctx); err != nil {
		t.Fatal(err)
	}
}

// childEnv carries a childSpec (JSON) to the test binary re-executed as a
// waiter process.
const childEnv = "LOCKTOP_REDISLOCK_CHILD"

// childSpec says what the waiter process waits for.
type childSpec struct {
	URL, Prefix, Key string
	Wait             time.Duration
	TTL              time.Duration
}

// childMain is the waiter process: it waits for the key and, if it gets
// it, holds it until it is killed.
func childMain() int {
	var s childSpec
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &s); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	opt, err := redis.ParseURL(s.URL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	opt.ContextTimeoutEnabled = true
	l := New(redis.NewClient(opt), Options{Prefix: s.Prefix, Owner: "doomed-waiter"})
	if _, err := l.Acquire(context.Background(), s.Key, lockcore.Wait(s.Wait), lockcore.TTL(s.TTL)); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	select {} // held until killed
}

// redisKind is the session mutex as a lockKind, on the test server under a
// prefix of the test's own; the waiter process asks for the default 30s
// TTL, as the reproduction did.
func redisKind(t *testing.T) lockKind {
	l := newLocker(t, Options{Owner: "holder"})
	return lockKind{
		name:  "redislock",
		bound: HandOverTTL,
		acquire: func(ctx context.Context, key string, wait time.Duration) (func(context.Context) error, error) {
			k, err := l.Acquire(ctx, key, lockcore.Wait(wait))
			if err != nil {
				return nil, err
			}
			return k.Release, nil
		},
		waiting: func(ctx context.Context, key string) (int, error) {
			tbl, err := l.Inspect(ctx, 0)
			if err != nil {
				return 0, err
			}
			for _, in := range tbl.Locks {
				if in.Key == key {
					return len(in.Waiters), nil
				}
			}
			return 0, nil
		},
		waiter: func(key string) *exec.Cmd {
			spec, _ := json.Marshal(childSpec{URL: redistest.URL(t), Prefix: l.prefix, Key: key, Wait: time.Minute, TTL: DefaultTTL})
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
			return cmd
		},
	}
}

// Issue 31, fault 1: a waiter killed while queued was handed the key for
// its whole TTL (30s); now only for HandOverTTL, which a live waiter
// extends at once.
func TestDeadWaiterReleasesWithinBound(t *testing.T) { testDeadWaiter(t, redisKind(t)) }
