package locktest_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/locktest"
	"github.com/locktop/locktop/lockcore/redislock"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The family's kinds: every one passes the same suite.
var kinds = []locktest.Kind{
	{Name: "advisory", Open: advisoryStore},
	{Name: "redis", Open: redisStore},
	{Name: "lease-postgres", Open: leasePostgresStore},
	{Name: "lease-sqlite", Open: leaseSQLiteStore},
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

type redisStoreT struct{ rdb *redis.Client }

func redisStore(t *testing.T) locktest.Store {
	return redisStoreT{redistest.ClientOf(t, redistest.Private(t))}
}

func (s redisStoreT) Locker(t *testing.T) locktest.Locker {
	l := redislock.New(s.rdb, redislock.Options{TTL: 3 * time.Second})
	t.Cleanup(func() { _ = l.Close() })
	return redisL{l}
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

var leaseOptions = lease.Options{Lease: 5 * time.Second, Heartbeat: 100 * time.Millisecond}

type leaseStoreT struct {
	open func(t *testing.T) *lease.Manager
	del  func(t *testing.T, lockID string) // deletes the grant rows of lockID
}

func (s leaseStoreT) Locker(t *testing.T) locktest.Locker { return leaseL{s.open(t)} }

// Lose deletes the grant's row.
func (s leaseStoreT) Lose(t *testing.T, n string) { s.del(t, res(n).String()) }

var schemas atomic.Int64

func leasePostgresStore(t *testing.T) locktest.Store {
	schema := fmt.Sprintf("locktest_%d", schemas.Add(1))
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 16 })
	return leaseStoreT{
		open: func(t *testing.T) *lease.Manager {
			o := leaseOptions
			o.Schema = schema
			m, err := lease.OpenPostgres(ctxT(t), pool, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			return m
		},
		del: func(t *testing.T, lockID string) {
			t.Helper()
			tag, err := pool.Exec(ctxT(t), "DELETE FROM "+schema+".dal_locks WHERE lock_id = $1", lockID)
			if err != nil || tag.RowsAffected() == 0 {
				t.Fatalf("deleting the row of %s: %v (%d rows)", lockID, err, tag.RowsAffected())
			}
		},
	}
}

func leaseSQLiteStore(t *testing.T) locktest.Store {
	path := filepath.Join(t.TempDir(), "locktest.db")
	return leaseStoreT{
		open: func(t *testing.T) *lease.Manager {
			m, err := lease.OpenSQLite(ctxT(t), path, leaseOptions)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			return m
		},
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
	}
}
