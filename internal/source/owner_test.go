package source_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
)

// One process is one holder across kinds: an advisory lock, a Redis lock
// and a lease it takes with the defaults show the same Owner in one monitor
// snapshot (lockcore.Owner, carried by the lock connection's
// application_name, the Redis hold and the lease row), so the wait-for
// graph can join them.
func TestOneOwnerAcrossKinds(t *testing.T) {
	ctx := context.Background()
	svc := lockcore.New(pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 2 }))
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	locker := redislock.New(rdb, redislock.Options{})
	defer locker.Close()

	path := filepath.Join(t.TempDir(), "leases.db")
	leases, err := lease.OpenSQLite(ctx, path, lease.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer leases.Close()

	key := lockcore.HashKey("owner-test")
	err = svc.With(ctx, key, func(ctx context.Context) error {
		return locker.With(ctx, "t1:a1:c1:web", func(ctx context.Context) error {
			l, err := leases.Acquire(ctx, lease.Map("m1"), lease.Write)
			if err != nil {
				return err
			}
			defer l.Release(ctx)
			pg := source.Named("postgres", func(ctx context.Context) (model.Snapshot, error) {
				return pgsource.Inspect(ctx, pgtest.Conn(t))
			})
			rs := redissource.New(redistest.ClientOf(t, srv), redissource.Options{})
			defer rs.Close()
			snap := model.Merge(source.PollAll(ctx, []source.Source{pg, rs, leasesource.SQLite("lease", path)}))
			var owners []string
			for _, l := range snap.Locks {
				advisory := l.Kind == model.KindAdvisory && l.EntityID == key.EntityID() && l.Granted
				other := (l.Kind == model.KindRedis || l.Kind == model.KindLease) && l.Granted
				if advisory || other {
					owners = append(owners, string(l.Kind)+"="+l.Owner)
					if l.Owner != lockcore.Owner() {
						t.Errorf("%s lock %+v: owner %q, want the process's %q", l.Kind, l, l.Owner, lockcore.Owner())
					}
				}
			}
			if len(owners) != 3 {
				t.Errorf("want the advisory lock, the Redis lock and the lease, got %v (snapshot %+v)", owners, snap.Locks)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}
