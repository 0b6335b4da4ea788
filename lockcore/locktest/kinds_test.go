package locktest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/leasedb"
	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/locktest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// TestMain runs the suite against the throw-away PostgreSQL (pgtest) and
// servers and files of each test's own. The test binary run again as a
// waiter, or as a process a crash kills, skips all that and runs its part.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	pgtest.Main(m)
}

// The family's kinds: every one passes the same suite. The dead-waiter
// bounds are each package's documented one: a dead advisory waiter's
// backend, granted the key in its turn, finds its client gone and ends
// within milliseconds; a Redis hand-over to a dead waiter lapses after
// HandOverTTL; a lease waiter never keeps the lock from a writer (the
// suite's holders write).
var kinds = []locktest.Kind{
	{Name: "advisory", Open: advisoryStore, Crash: advisoryCrashStore},
	{Name: "redis", Open: redisStore, DeadWaiterBound: redislock.HandOverTTL, Crash: redisCrashStore},
	{Name: "lease-postgres", Open: leasePostgresStore, Crash: leasePostgresCrashStore, StoresOrdered: true},
	{Name: "lease-sqlite", Open: leaseSQLiteStore, Crash: leaseSQLiteCrashStore, StoresOrdered: true},
}

func TestConformance(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) { locktest.Run(t, k) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// hold turns a kind's (*Lock, error) into (Hold, error) without a non-nil
// interface holding a nil pointer.
func hold[L lockcore.Hold](l L, err error) (lockcore.Hold, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Advisory locks: a Service per Locker, each on a pool of its own; a name
// is the one-bigint key of its hash.

type advisory struct{ s *lockcore.Service }

func key(name string) lockcore.Key { return lockcore.HashKey(name) }

func (a advisory) Acquire(ctx context.Context, n string, opts ...lockcore.AcquireOption) (lockcore.Hold, error) {
	return hold(a.s.Acquire(ctx, key(n), opts...))
}
func (a advisory) TryAcquire(ctx context.Context, n string) (lockcore.Hold, error) {
	return hold(a.s.TryAcquire(ctx, key(n)))
}
func (a advisory) With(ctx context.Context, n string, fn func(context.Context) error, opts ...lockcore.AcquireOption) error {
	return a.s.With(ctx, key(n), fn, opts...)
}
func (a advisory) TryWith(ctx context.Context, n string, fn func(context.Context) error) (bool, error) {
	return a.s.TryWith(ctx, key(n), fn)
}

type advisoryStoreT struct{}

func advisoryStore(t *testing.T) locktest.Store { return advisoryStoreT{} }

func (advisoryStoreT) Locker(t *testing.T) locktest.Locker {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 4 })
	return advisory{lockcore.New(pool)}
}

// Elsewhere is a Service on a database of the test's own.
func (advisoryStoreT) Elsewhere(t *testing.T) locktest.Locker {
	db := pgtest.Database(t, fmt.Sprintf("locktest_elsewhere_%d", schemas.Add(1)))
	pool, err := pgxpool.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return advisory{lockcore.New(pool)}
}

func (advisoryStoreT) Waiter(t *testing.T, n string) *exec.Cmd {
	return child(t, childSpec{Kind: "advisory", Where: pgtest.DSN(t), Name: n})
}

// Waiting counts the sessions of the test database queued for the key.
func (advisoryStoreT) Waiting(t *testing.T, n string) int {
	t.Helper()
	v := key(n).Int64()
	var waiting int
	err := pgtest.Conn(t).QueryRow(ctxT(t), `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1 AND classid = $1::bigint::oid AND objid = $2::bigint::oid
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		int64(uint32(v>>32)), int64(uint32(v))).Scan(&waiting)
	if err != nil {
		t.Fatalf("counting the waiters of %s: %v", n, err)
	}
	return waiting
}

// Lose terminates the backend whose session holds the key.
func (advisoryStoreT) Lose(t *testing.T, n string) {
	t.Helper()
	v := key(n).Int64()
	var killed bool
	err := pgtest.Conn(t).QueryRow(ctxT(t), `SELECT bool_or(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND classid = $1::bigint::oid AND objid = $2::bigint::oid`,
		int64(uint32(v>>32)), int64(uint32(v))).Scan(&killed)
	if err != nil || !killed {
		t.Fatalf("terminating the holder of %s: %v (killed %v)", n, err, killed)
	}
}

// Redis session locks: a Locker per Locker on a Redis of the test's own; a
// short TTL, so a hold that is not extended is seen lost within seconds.

type redisL struct{ l *redislock.Locker }

func (r redisL) Acquire(ctx context.Context, n string, opts ...lockcore.AcquireOption) (lockcore.Hold, error) {
	return hold(r.l.Acquire(ctx, n, opts...))
}
func (r redisL) TryAcquire(ctx context.Context, n string) (lockcore.Hold, error) {
	return hold(r.l.TryAcquire(ctx, n))
}
func (r redisL) With(ctx context.Context, n string, fn func(context.Context) error, opts ...lockcore.AcquireOption) error {
	return r.l.With(ctx, n, fn, opts...)
}
func (r redisL) TryWith(ctx context.Context, n string, fn func(context.Context) error) (bool, error) {
	return r.l.TryWith(ctx, n, fn)
}

type redisStoreT struct {
	srv *redisserver.Server
	rdb *redis.Client
}

func redisStore(t *testing.T) locktest.Store {
	srv := redistest.Private(t)
	return redisStoreT{srv, redistest.ClientOf(t, srv)}
}

func (s redisStoreT) Locker(t *testing.T) locktest.Locker {
	l := redislock.New(s.rdb, redislock.Options{TTL: 3 * time.Second})
	t.Cleanup(func() { _ = l.Close() })
	return redisL{l}
}

// Elsewhere is a Locker on another Redis of the test's own.
func (s redisStoreT) Elsewhere(t *testing.T) locktest.Locker {
	return redisStoreT{rdb: redistest.ClientOf(t, redistest.Private(t))}.Locker(t)
}

// Waiter is a Locker with the default TTL (30s), which a hand-over to a
// dead waiter must not grant.
func (s redisStoreT) Waiter(t *testing.T, n string) *exec.Cmd {
	return child(t, childSpec{Kind: "redis", Where: s.srv.URL(), Name: n})
}

func (s redisStoreT) Waiting(t *testing.T, n string) int {
	t.Helper()
	tbl, err := redislocks.Read(ctxT(t), s.rdb, redislock.DefaultPrefix, 0)
	if err != nil {
		t.Fatalf("counting the waiters of %s: %v", n, err)
	}
	for _, in := range tbl.Locks {
		if in.Key == n {
			return len(in.Waiters)
		}
	}
	return 0
}

// Lose deletes the hold's key.
func (s redisStoreT) Lose(t *testing.T, n string) {
	t.Helper()
	if got, err := s.rdb.Del(ctxT(t), redislock.DefaultPrefix+n).Result(); err != nil || got != 1 {
		t.Fatalf("deleting %s: %v (%d deleted)", n, err, got)
	}
}

// Leases: a Manager per Locker, all on the test's tables; a name is a map,
// taken for writing. A short heartbeat finds a deleted row at once.

type leaseL struct{ m *lease.Manager }

func res(n string) lease.Resource { return lease.Map(n) }

func (l leaseL) Acquire(ctx context.Context, n string, opts ...lockcore.AcquireOption) (lockcore.Hold, error) {
	return hold(l.m.Acquire(ctx, res(n), lease.Write, opts...))
}
func (l leaseL) TryAcquire(ctx context.Context, n string) (lockcore.Hold, error) {
	return hold(l.m.TryAcquire(ctx, res(n), lease.Write))
}
func (l leaseL) With(ctx context.Context, n string, fn func(context.Context) error, opts ...lockcore.AcquireOption) error {
	return l.m.With(ctx, res(n), lease.Write, fn, opts...)
}
func (l leaseL) TryWith(ctx context.Context, n string, fn func(context.Context) error) (bool, error) {
	return l.m.TryWith(ctx, res(n), lease.Write, fn)
}

// leaseOptions: no case waits for a lease to run out (a loss deletes the
// row), so a long lease costs nothing, and keeps a loaded machine's late
// heartbeats from losing a hold a case relies on.
var leaseOptions = lease.Options{Lease: 15 * time.Second, Heartbeat: 100 * time.Millisecond}

type leaseStoreT struct {
	open   func(t *testing.T) *lease.Manager
	apart  func(t *testing.T) *lease.Manager // on other tables
	del    func(t *testing.T, lockID string) // deletes the grant rows of lockID
	source *leasesource.Source               // the monitor's view of the tables
	list   func(ctx context.Context) (*leasedb.Listing, error)
	child  childSpec // where a waiter process finds the tables
}

func (s leaseStoreT) Locker(t *testing.T) locktest.Locker { return leaseL{s.open(t)} }

func (s leaseStoreT) Elsewhere(t *testing.T) locktest.Locker { return leaseL{s.apart(t)} }

func (s leaseStoreT) Waiter(t *testing.T, n string) *exec.Cmd {
	c := s.child
	c.Name = n
	return child(t, c)
}

// Waiting counts the waiters of the map named n that every process sees.
func (s leaseStoreT) Waiting(t *testing.T, n string) int {
	t.Helper()
	snap, err := s.source.Poll(ctxT(t))
	if err != nil {
		t.Fatalf("counting the waiters of %s: %v", n, err)
	}
	waiting := 0
	for _, in := range snap.Locks {
		if in.Name == res(n).String() && !in.Granted {
			waiting++
		}
	}
	return waiting
}

// Describe lists the grants of the map named n: owner (host:pid:…),
// mode, fence, when granted, lease and heartbeat, by the database's clock.
func (s leaseStoreT) Describe(t *testing.T, n string) string {
	l, err := s.list(ctxT(t))
	if err != nil {
		return "listing the grants: " + err.Error()
	}
	out := ""
	for _, e := range l.Entries {
		if e.LockID == res(n).String() && e.Granted {
			out += fmt.Sprintf("  owner %s, %s, fence %d, granted %s, lease until %s (%v left), heartbeat %s (%v ago), stale %v\n",
				e.Owner, e.Mode, e.Fence, e.Since.Format(stamp), e.LeaseExpires.Format(stamp), e.LeaseLeft,
				e.Heartbeat.Format(stamp), e.HeartbeatAge, e.Stale)
		}
	}
	if out == "" {
		out = "  no grant (the database's clock: " + l.Now.Format(stamp) + ")\n"
	}
	return out
}

// stamp formats the database's times to the microsecond.
const stamp = "15:04:05.000000"

// Lose deletes the grant's row.
func (s leaseStoreT) Lose(t *testing.T, n string) { s.del(t, res(n).String()) }

var schemas atomic.Int64

func leasePostgresStore(t *testing.T) locktest.Store {
	schema := fmt.Sprintf("locktest_%d", schemas.Add(1))
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 16 })
	open := func(t *testing.T, schema string) *lease.Manager {
		o := leaseOptions
		o.Schema = schema
		m, err := lease.OpenPostgres(ctxT(t), pool, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	return leaseStoreT{
		open:  func(t *testing.T) *lease.Manager { return open(t, schema) },
		apart: func(t *testing.T) *lease.Manager { return open(t, schema+"_apart") },
		del: func(t *testing.T, lockID string) {
			t.Helper()
			tag, err := pool.Exec(ctxT(t), "DELETE FROM "+schema+".dal_locks WHERE lock_id = $1", lockID)
			if err != nil || tag.RowsAffected() == 0 {
				t.Fatalf("deleting the row of %s: %v (%d rows)", lockID, err, tag.RowsAffected())
			}
		},
		source: leasesource.Postgres("lease", pool, schema, false),
		list:   func(ctx context.Context) (*leasedb.Listing, error) { return leasedb.ReadPostgres(ctx, pool, schema) },
		child:  childSpec{Kind: "lease-postgres", Where: pgtest.DSN(t), Schema: schema},
	}
}

func leaseSQLiteStore(t *testing.T) locktest.Store {
	path := filepath.Join(t.TempDir(), "locktest.db")
	open := func(t *testing.T, path string) *lease.Manager {
		m, err := lease.OpenSQLite(ctxT(t), path, leaseOptions)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	return leaseStoreT{
		open:  func(t *testing.T) *lease.Manager { return open(t, path) },
		apart: func(t *testing.T) *lease.Manager { return open(t, filepath.Join(t.TempDir(), "apart.db")) },
		del: func(t *testing.T, lockID string) {
			t.Helper()
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			r, err := db.ExecContext(ctxT(t), "DELETE FROM dal_locks WHERE lock_id = ?", lockID)
			if err != nil {
				t.Fatalf("deleting the row of %s: %v", lockID, err)
			}
			if n, _ := r.RowsAffected(); n == 0 {
				t.Fatalf("deleting the row of %s: no row", lockID)
			}
		},
		source: leasesource.SQLite("lease-sqlite", path),
		list:   func(ctx context.Context) (*leasedb.Listing, error) { return leasedb.ReadSQLiteFile(ctx, path) },
		child:  childSpec{Kind: "lease-sqlite", Where: path},
	}
}
