// Package redistest gives tests a real Redis.
//
// A test package calls Main from its TestMain. Main starts the same
// throw-away redis-server the demo uses (internal/redisserver), or, when
// LOCKTOP_TEST_REDIS names a server (a go-redis URL such as
// redis://host:6379/0 or unix:///path/redis.sock), uses that one; it stops
// what it started afterwards, then fails the run if goroutines leaked.
// Tests keep apart by key prefix (Prefix), not by flushing, so a shared
// server's other keys are never touched. Cluster starts a throw-away
// three-master Redis Cluster on first use (or uses the one
// LOCKTOP_TEST_REDIS_CLUSTER names). A test that needs Redis and cannot
// have it fails with the reason: it never skips. For polling with a
// deadline use internal/pgtest.Eventually.
package redistest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/locktop/locktop/internal/testenv/redisserver"
)

// Environment variables that point tests at servers of the caller's
// choosing instead of throw-away ones.
const (
	EnvURL     = "LOCKTOP_TEST_REDIS"         // a go-redis URL
	EnvCluster = "LOCKTOP_TEST_REDIS_CLUSTER" // comma-separated host:port of cluster nodes
)

var (
	url      string
	setupErr error
	server   *redisserver.Server

	clusterOnce  sync.Once
	cluster      *redisserver.Cluster
	clusterAddrs []string
	clusterErr   error

	seq atomic.Int64
)

// Main sets up the server, runs the tests, stops what it started and checks
// for leaked goroutines. Use it as:
// func TestMain(m *testing.M) { redistest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	setupErr = setup()
	if setupErr != nil {
		// Every test and example needs the server: fail the run at once
		// with the reason (a test never skips), rather than once per test.
		fmt.Fprintln(os.Stderr, "redistest:", setupErr)
		fmt.Println("FAIL")
		return 1
	}
	code := m.Run()
	if server != nil {
		if err := server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "redistest:", err)
		}
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "redistest:", err)
		}
	}
	if code == 0 {
		if err := findLeaks(); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: goroutines leaked by the tests: %v\n", err)
			return 1
		}
	}
	return code
}

// findLeaks is goleak.Find with more patience: go-redis's pool, after
// failed dials (the tests that stop Redis), probes in a goroutine that
// sleeps a second between tries and only then sees its pool closed.
func findLeaks() error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := goleak.Find()
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if env := os.Getenv(EnvURL); env != "" {
		url = env
	} else {
		s, err := redisserver.Start(ctx, redisserver.Options{})
		if err != nil {
			return fmt.Errorf("no Redis for the tests: %w (or set %s to a server's URL)", err, EnvURL)
		}
		server, url = s, s.URL()
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvURL, err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("the test Redis at %s does not answer: %w", url, err)
	}
	return nil
}

// URL returns the test server's URL, or fails t with the reason there is
// none.
func URL(t testing.TB) string {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("redistest: %v", setupErr)
	}
	if url == "" {
		t.Fatal("redistest: no server: call redistest.Main from TestMain")
	}
	return url
}

// ServerURL returns the test server's URL, or "" when Main could not set it
// up: for examples, which have no testing.TB to fail.
func ServerURL() string {
	if setupErr != nil {
		return ""
	}
	return url
}

// Options returns client options for the test server, with
// ContextTimeoutEnabled as the lock library asks (go-redis otherwise lets
// a command outlive its context's deadline on a Redis that hangs).
func Options(t testing.TB) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	return opt
}

// Client returns a client of the test server, closed when the test ends.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(Options(t))
	t.Cleanup(func() { c.Close() })
	return c
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// Prefix returns a key prefix no other test uses ("test:Name:N:"); the keys
// under it, and the lock library's tagged keys ("{tag}test:Name:N:..."),
// are deleted when the test ends.
func Prefix(t testing.TB) string {
	t.Helper()
	p := fmt.Sprintf("test:%s:%d:", unsafe.ReplaceAllString(t.Name(), "_"), seq.Add(1))
	u := URL(t)
	t.Cleanup(func() {
		opt, err := redis.ParseURL(u)
		if err != nil {
			return
		}
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		DeletePrefix(ctx, c, p)
	})
	return p
}

// DeletePrefix deletes, on one node, the keys that begin with prefix or
// with a hash tag followed by prefix. It is best effort: for cleanup.
func DeletePrefix(ctx context.Context, c *redis.Client, prefix string) {
	esc := globEscape(prefix)
	for _, pattern := range []string{esc + "*", "{*}" + esc + "*"} {
		iter := c.Scan(ctx, 0, pattern, 500).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			_ = c.Unlink(ctx, keys[:n]...).Err()
			keys = keys[n:]
		}
	}
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// Private starts a throw-away server of the test's own, stopped when the
// test ends: for tests that stop or restart Redis under a client.
func Private(t testing.TB) *redisserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// ClientOf returns a client of server s, closed when the test ends.
func ClientOf(t testing.TB, s *redisserver.Server) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// PrivateCluster starts a throw-away three-master Redis Cluster of the
// test's own, stopped when the test ends: for tests that stop a node.
func PrivateCluster(t testing.TB) *redisserver.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := redisserver.StartCluster(ctx, redisserver.Options{})
	if err != nil {
		t.Fatalf("redistest: no Redis Cluster for the test: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Cluster returns a client of a three-master Redis Cluster, closed when the
// test ends. The throw-away cluster starts on the first call and stops when
// Main returns.
func Cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	clusterOnce.Do(func() {
		if env := os.Getenv(EnvCluster); env != "" {
			clusterAddrs = strings.Split(env, ",")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cluster, clusterErr = redisserver.StartCluster(ctx, redisserver.Options{})
		if clusterErr == nil {
			clusterAddrs = cluster.Addrs()
		}
	})
	if clusterErr != nil {
		t.Fatalf("redistest: no Redis Cluster for the tests: %v (or set %s)", clusterErr, EnvCluster)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}
