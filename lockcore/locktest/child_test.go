package locktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/locktest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// childEnv carries a childSpec (JSON) to the test binary run again as a
// process of its own: a waiter the dead-waiter case kills, or the process
// a crash of an embedded store kills.
const childEnv = "LOCKTOP_LOCKTEST_CHILD"

// childSpec says what the child process takes, where, and what it does.
type childSpec struct {
	Kind   string // a kinds entry's Name
	Where  string // the DSN, Redis URL or SQLite path
	Schema string // lease on PostgreSQL
	Name   string
	// Task is "" (wait for Name, up to a minute, and hold it until killed
	// if granted) or "grants" (take and release Name over and over,
	// printing each grant's fence on a line of its own).
	Task  string
	Lease time.Duration // lease kinds: the Manager's lease; 0 the suite's
}

// child returns the test binary as a child process doing s, not started;
// it is killed when the test ends, if it still runs.
func child(t *testing.T, s childSpec) *exec.Cmd {
	t.Helper()
	spec, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// childMain is the child process. It ends only when it is killed, or with
// exit status 1 and the reason on stderr.
func childMain() int {
	var s childSpec
	err := json.Unmarshal([]byte(os.Getenv(childEnv)), &s)
	if err == nil {
		err = s.run(context.Background())
	}
	fmt.Fprintln(os.Stderr, "locktest child:", err)
	return 1
}

func (s childSpec) run(ctx context.Context) error {
	l, err := s.locker(ctx)
	if err != nil {
		return err
	}
	if s.Task == "grants" {
		for {
			h, err := l.Acquire(ctx, s.Name, lockcore.Wait(time.Minute))
			if err != nil {
				return err
			}
			fmt.Println(h.Fence())
			if err := h.Release(ctx); err != nil {
				return err
			}
		}
	}
	if _, err := l.Acquire(ctx, s.Name, lockcore.Wait(time.Minute)); err != nil {
		return err
	}
	fmt.Println("held")
	select {} // held until killed
}

// locker opens the child's holder, with what the parent's holders of the
// kind use but for the Redis TTL: the default 30s, which a hand-over to a
// dead waiter must not grant.
func (s childSpec) locker(ctx context.Context) (locktest.Locker, error) {
	o := leaseOptions
	if s.Lease != 0 {
		o.Lease, o.Heartbeat = s.Lease, 0
	}
	switch s.Kind {
	case "advisory":
		pool, err := pgxpool.New(ctx, s.Where)
		if err != nil {
			return nil, err
		}
		return advisory{lockcore.New(pool)}, nil
	case "redis":
		opt, err := redis.ParseURL(s.Where)
		if err != nil {
			return nil, err
		}
		opt.ContextTimeoutEnabled = true
		return redisL{redislock.New(redis.NewClient(opt), redislock.Options{Owner: "locktest-child"})}, nil
	case "lease-postgres":
		pool, err := pgxpool.New(ctx, s.Where)
		if err != nil {
			return nil, err
		}
		o.Schema = s.Schema
		m, err := lease.OpenPostgres(ctx, pool, o)
		return leaseL{m}, err
	case "lease-sqlite":
		m, err := lease.OpenSQLite(ctx, s.Where, o)
		return leaseL{m}, err
	}
	return nil, errors.New("no kind " + s.Kind)
}
