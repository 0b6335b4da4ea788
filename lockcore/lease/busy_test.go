package lease

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// A writer in another process holding the SQLite file past the busy
// timeout makes TryAcquire fail with ErrBusy, not the driver's raw error,
// and Acquire keep trying until its wait ends (issue 31, also noted).
// Not parallel: it shortens the busy timeout of the Managers it opens.
func TestSQLiteBusyIsASentinel(t *testing.T) {
	old := sqliteBusy
	sqliteBusy = 100 * time.Millisecond
	t.Cleanup(func() { sqliteBusy = old })
	path := filepath.Join(t.TempDir(), "lease.db")
	m, err := OpenSQLite(ctxT(t), path, testOptions(Options{Wait: 500 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// The other writer: a connection of its own, as another process's.
	db, err := sql.Open("sqlite", sqliteDSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctxT(t), nil) // BEGIN IMMEDIATE: the file's write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`INSERT INTO dal_resources (lock_id) VALUES ('map:other')`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryAcquire(ctxT(t), Map("busy"), Write); !errors.Is(err, ErrBusy) {
		t.Errorf("TryAcquire on a busy file: %v, want ErrBusy", err)
	}
	if _, err := m.Acquire(ctxT(t), Map("busy"), Write); !errors.Is(err, ErrTimeout) {
		t.Errorf("Acquire on a file busy for longer than its wait: %v, want ErrTimeout", err)
	}
	tx.Rollback()
	l, err := m.TryAcquire(ctxT(t), Map("busy"), Write)
	if err != nil {
		t.Fatalf("TryAcquire once the file is free: %v", err)
	}
	release(t, l)
}

// Under default_transaction_isolation = serializable, PostgreSQL may
// abort a transaction with a serialization failure; the acquire retries it
// rather than return it (issue 31, also noted).
func TestPostgresSerializableRetried(t *testing.T) {
	schema := fmt.Sprintf("lease_t%d", schemas.Add(1))
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.MaxConns = 12
		c.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	})
	var ms []*Manager
	for i := range 4 {
		m, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Schema: schema, Owner: fmt.Sprint("m", i)}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		ms = append(ms, m)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			m := ms[i%len(ms)]
			for j := range 15 {
				mode := Write
				if j%2 == 0 {
					mode = Read
				}
				l, err := m.Acquire(ctxT(t), Map(fmt.Sprint("s", j%3)), mode)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if err := l.Release(ctxT(t)); err != nil {
					t.Errorf("release: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}
