package lease

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// TestMain runs the tests against a throw-away PostgreSQL (pgtest) and
// SQLite files in temporary directories. The test binary re-executed as a
// helper process (TestTwoProcesses) skips all that and runs its part.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	pgtest.Main(m)
}

// env is one test's database, on one store: every Manager it opens shares
// the same tables.
type env struct {
	t     *testing.T
	store string // "postgres" or "sqlite"
	// open returns a new Manager on the test's tables, closed at the end.
	open func(o Options) *Manager
	// exec runs SQL against the test's tables, behind the Managers' backs
	// (tables named without a schema; for PostgreSQL the search_path is
	// the test's schema).
	exec func(sql string, args ...any)
	// where is what a helper process needs to open the same tables.
	where helperWhere
}

var schemas atomic.Int64

// postgresEnv gives each test a schema of its own on the test database.
func postgresEnv(t *testing.T) *env {
	schema := fmt.Sprintf("lease_t%d", schemas.Add(1))
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 12 })
	e := &env{t: t, store: "postgres", where: helperWhere{Store: "postgres", DSN: pgtest.DSN(t), Schema: schema}}
	e.open = func(o Options) *Manager {
		t.Helper()
		o.Schema = schema
		m, err := OpenPostgres(ctxT(t), pool, testOptions(o))
		if err != nil {
			t.Fatalf("OpenPostgres: %v", err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	e.exec = func(sql string, args ...any) {
		t.Helper()
		ctx := ctxT(t)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, "SET search_path TO "+schema); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, "RESET search_path")
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	return e
}

// sqliteEnv gives each test a SQLite file of its own.
func sqliteEnv(t *testing.T) *env {
	path := filepath.Join(t.TempDir(), "lease.db")
	e := &env{t: t, store: "sqlite", where: helperWhere{Store: "sqlite", Path: path}}
	e.open = func(o Options) *Manager {
		t.Helper()
		m, err := OpenSQLite(ctxT(t), path, testOptions(o))
		if err != nil {
			t.Fatalf("OpenSQLite: %v", err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	e.exec = func(q string, args ...any) {
		t.Helper()
		db, err := sql.Open("sqlite", sqliteDSN(path, false))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctxT(t), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return e
}

// testOptions are the defaults of the tests: leases long enough that a
// loaded machine never loses one by accident, waits short enough to fail
// fast. Tests that need leases to run out set their own.
func testOptions(o Options) Options {
	if o.Lease == 0 {
		o.Lease = 5 * time.Second
	}
	if o.Heartbeat == 0 && o.Lease >= time.Second {
		o.Heartbeat = 500 * time.Millisecond
	}
	if o.Wait == 0 {
		o.Wait = 10 * time.Second
	}
	return o
}

// ctxT is a context for one test step, ended with the test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
