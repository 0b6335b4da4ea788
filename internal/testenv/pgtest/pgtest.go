// Package pgtest gives tests a real PostgreSQL database.
//
// A test package calls Main from its TestMain. Main starts the same
// throw-away cluster the demo uses, or, when LOCKTOP_TEST_DSN is set, uses
// that server; either way it creates a fresh database for the test binary
// and drops it afterwards, then fails the run if goroutines leaked. A test
// that needs the database and cannot have it fails with the reason: it never
// skips.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// EnvDSN names the environment variable that points tests at a server of
// the caller's choosing instead of a throw-away cluster.
const EnvDSN = "LOCKTOP_TEST_DSN"

var (
	adminDSN string // the server's maintenance database
	dbName   string // this test binary's database
	dsn      string // DSN of dbName
	setupErr error
	cluster  *pgcluster.Cluster
)

// Main sets up the database, runs the tests, tears down and checks for
// leaked goroutines. Use it as: func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit, for a TestMain with clean-up of its own:
// it returns the code to exit with.
func Run(m *testing.M) int { return run(m) }

func run(m *testing.M) int {
	setupErr = setup()
	code := m.Run()
	teardown()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: goroutines leaked by the tests: %v\n", err)
			return 1
		}
	}
	return code
}

func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if env := os.Getenv(EnvDSN); env != "" {
		adminDSN = env
	} else {
		c, err := pgcluster.Start(ctx, pgcluster.Options{Template: true})
		if err != nil {
			return fmt.Errorf("no PostgreSQL for the tests: %w (or set %s to a server's DSN)", err, EnvDSN)
		}
		cluster = c
		adminDSN = c.DSN("postgres")
	}
	dbName = fmt.Sprintf("locktop_test_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("connecting to the test server: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbName}.Sanitize()); err != nil {
		return fmt.Errorf("creating the test database: %w", err)
	}
	d, err := WithDatabase(adminDSN, dbName)
	if err != nil {
		return err
	}
	// The tests' own sessions are this project's: the built-in registry
	// names their keys (registry.Builtin applies to "locktop.*"), as it
	// names the lock library's. A test of a stranger's session sets its
	// own application_name.
	dsn, err = withParam(d, "application_name", TestApplicationName)
	return err
}

// TestApplicationName is the application_name of the sessions DSN and
// Pool open, unless a test sets its own.
const TestApplicationName = "locktop.test"

// withParam returns dsn with a connection parameter set.
func withParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("pgtest: bad DSN: %w", err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " " + key + "='" + strings.ReplaceAll(value, "'", `\'`) + "'", nil
}

func teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if setupErr == nil && dbName != "" {
		if conn, err := pgx.Connect(ctx, adminDSN); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{dbName}.Sanitize()+" WITH (FORCE)")
			conn.Close(ctx)
		}
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
}

// DSN returns the DSN of the test binary's database, or fails t with the
// reason there is none.
func DSN(t testing.TB) string {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("pgtest: %v", setupErr)
	}
	if dsn == "" {
		t.Fatal("pgtest: no database: call pgtest.Main from TestMain")
	}
	return dsn
}

// DSNForExamples returns the DSN of the test binary's database to runnable
// examples, which have no testing.TB to fail; it panics with the reason
// when there is none.
func DSNForExamples() string {
	if setupErr != nil {
		panic(fmt.Sprintf("pgtest: %v", setupErr))
	}
	if dsn == "" {
		panic("pgtest: no database: call pgtest.Main from TestMain")
	}
	return dsn
}

// AdminDSN returns the DSN of the server's maintenance database, for tests
// that create roles or databases of their own.
func AdminDSN(t testing.TB) string {
	t.Helper()
	DSN(t)
	return adminDSN
}

// Pool returns a pool on the test database, closed when the test ends.
// configure, if not nil, adjusts the configuration first.
func Pool(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(DSN(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if configure != nil {
		configure(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// Conn returns a single connection on the test database, closed when the
// test ends.
func Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, DSN(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// WithDatabase returns dsn pointed at database db. It understands both URL
// and keyword/value DSNs.
func WithDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("pgtest: bad DSN: %w", err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value form the last setting of a keyword wins.
	return strings.TrimSpace(dsn) + " dbname='" + strings.ReplaceAll(db, "'", `\'`) + "'", nil
}

// WithUser returns dsn with another user and password. It understands both
// URL and keyword/value DSNs.
func WithUser(dsn, user, password string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("pgtest: bad DSN: %w", err)
		}
		u.User = url.UserPassword(user, password)
		q := u.Query()
		q.Del("user")
		q.Del("password")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }
	return strings.TrimSpace(dsn) + " user=" + quote(user) + " password=" + quote(password), nil
}

// Role creates a login role with password and the given extra grants (e.g.
// "pg_monitor"), dropped when the test ends, and returns a DSN for it on
// the test database.
func Role(t testing.TB, name, password string, grants ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, DSN(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer admin.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", ident, strings.ReplaceAll(password, "'", "''"))); err != nil {
		t.Fatalf("pgtest: creating role %s: %v", name, err)
	}
	for _, g := range grants {
		if _, err := admin.Exec(ctx, "GRANT "+pgx.Identifier{g}.Sanitize()+" TO "+ident); err != nil {
			t.Fatalf("pgtest: granting %s to %s: %v", g, name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, DSN(t)); err == nil {
			_, _ = c.Exec(ctx, "DROP ROLE IF EXISTS "+ident)
			c.Close(ctx)
		}
	})
	d, err := WithUser(DSN(t), name, password)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Database creates a database of the test's own named name (dropped first
// if a failed run left it), dropped with its sessions ended when the test
// ends, and returns a superuser DSN on it: for tests that watch several
// databases of one server.
func Database(t testing.TB, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminDSN(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer admin.Close(ctx)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, adminDSN); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	d, err := WithDatabase(adminDSN, name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Eventually polls cond every 10ms until it holds, and fails t (saying what
// it waited for) if it has not within 60 seconds: long enough for a
// loaded CI box, and a healthy run never waits it out.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
