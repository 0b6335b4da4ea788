package leasesource_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/model"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// holdAndQueue takes map:m1 for writing as "writer" and queues "reader"
// behind it, and returns once the reader is registered as waiting.
func holdAndQueue(t *testing.T, open func(owner string) *lease.Manager, src *leasesource.Source) model.Snapshot {
	t.Helper()
	ctx := context.Background()
	w, r := open("writer"), open("reader")
	l, err := w.Acquire(ctx, lease.Map("m1"), lease.Write)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if rl, err := r.Acquire(wctx, lease.Map("m1"), lease.Read); err == nil {
			_ = rl.Release(context.Background())
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	var snap model.Snapshot
	pgtest.Eventually(t, "the reader waits", func() bool {
		var err error
		if snap, err = src.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		return len(snap.Locks) == 2
	})
	h, wt := snap.Locks[0], snap.Locks[1]
	if h.Kind != model.KindLease || h.Name != "map:m1" || h.KeyLabel() != "map:m1" || h.Namespace != "MAP" || h.Owner != "writer" ||
		!h.Granted || h.Mode != "write" || h.Fence != l.Fence() || h.PID != 0 || h.Left(snap.Taken) <= 0 || h.Heartbeat.IsZero() || h.Stale {
		t.Errorf("holder %+v", h)
	}
	if wt.Granted || wt.Owner != "reader" || wt.Mode != "read" || wt.QueuePos != 1 || wt.WaitStart.IsZero() ||
		len(wt.BlockedByOwners) != 1 || wt.BlockedByOwners[0] != "writer" {
		t.Errorf("waiter %+v", wt)
	}
	return snap
}

func TestLeasePostgres(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	open := func(owner string) *lease.Manager {
		m, err := lease.OpenPostgres(ctx, pool, lease.Options{Owner: owner, Wait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	holdAndQueue(t, open, leasesource.Postgres("lease", pgtest.Pool(t, nil), "", false))
}

func TestLeaseSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locks.db")
	open := func(owner string) *lease.Manager {
		m, err := lease.OpenSQLite(ctx, path, lease.Options{Owner: owner, Wait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	holdAndQueue(t, open, leasesource.SQLite("lease-sqlite", path))
}

// The watched database's own lease schema is optional: without it the
// source is empty, not failing. A source asked for fails with ErrNoSchema
// where nothing has used lease locks, and creates nothing: no schema, no
// file.
func TestLeaseOptionalAndMissing(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Pool(t, nil)
	s, err := leasesource.Postgres("lease", pool, "no_such_schema", true).Poll(ctx)
	if err != nil || len(s.Locks) != 0 {
		t.Errorf("optional source without tables: %v, %d locks", err, len(s.Locks))
	}
	_, err = leasesource.Postgres("lease", pool, "no_such_schema", false).Poll(ctx)
	var n int
	_ = pool.QueryRow(ctx, "SELECT count(*) FROM pg_namespace WHERE nspname = 'no_such_schema'").Scan(&n)
	if !errors.Is(err, leasesource.ErrNoSchema) || n != 0 {
		t.Errorf("source without the schema: %v (schema created: %v)", err, n != 0)
	}
	missing := filepath.Join(t.TempDir(), "none.db")
	if _, err := leasesource.SQLite("lease-sqlite", missing).Poll(ctx); !errors.Is(err, leasesource.ErrNoSchema) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the source created %s", missing)
	}
	other := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE something (x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := leasesource.SQLite("lease-sqlite", other).Poll(ctx); !errors.Is(err, leasesource.ErrNoSchema) {
		t.Errorf("a file without lease tables: %v", err)
	}
}
