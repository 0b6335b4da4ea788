package locktest_test

import (
	"bufio"
	"context"
	"database/sql"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/locktest"
	"github.com/locktop/locktop/model"
)

// The stores the fences-across-a-crash case crashes: a PostgreSQL server
// of the test's own, killed with no shutdown and started again; a Redis of
// the test's own, restarted empty (it keeps nothing: its fences rest on the
// server's clock); a process using the SQLite file, killed while it takes
// the lock.

// pgCrashStore is a PostgreSQL server of the test's own that commits
// asynchronously, the setting under which a crash loses the last commits.
type pgCrashStore struct {
	c      *pgcluster.Cluster
	locker func(t *testing.T, pool *pgxpool.Pool) locktest.Locker
	// after, if set, runs after each crash, with the server back.
	after func(t *testing.T, s pgCrashStore, name string)
}

func newPGCrashStore(t *testing.T, locker func(t *testing.T, pool *pgxpool.Pool) locktest.Locker) pgCrashStore {
	// A walwriter that wakes every 10s, and no autovacuum, leave the WAL of
	// the last grants in the server's buffers until the crash, as a busy
	// server's last 200ms would.
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "off", "wal_writer_delay": "10s", "autovacuum": "off",
	}})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return pgCrashStore{c: c, locker: locker}
}

// serverCtx bounds a server's start after a crash: a loaded machine can
// take tens of seconds (the first start has pgcluster's own bound).
func serverCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (s pgCrashStore) pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(s.c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func (s pgCrashStore) Locker(t *testing.T) locktest.Locker { return s.locker(t, s.pool(t)) }

func (s pgCrashStore) Checkpoint(t *testing.T) {
	t.Helper()
	if _, err := s.pool(t).Exec(ctxT(t), "CHECKPOINT"); err != nil {
		t.Fatalf("CHECKPOINT: %v", err)
	}
}

func (s pgCrashStore) Crash(t *testing.T, n string) []int64 {
	t.Helper()
	if err := s.c.Crash(serverCtx(t)); err != nil {
		t.Fatalf("crash: %v", err)
	}
	if s.after != nil {
		s.after(t, s, n)
	}
	return nil
}

// advisoryCrashStore: every other Locker is a SharedPool Service, whose
// lock statements make their commit durable for themselves.
func advisoryCrashStore(t *testing.T) locktest.CrashStore {
	var n atomic.Int32
	return newPGCrashStore(t, func(t *testing.T, pool *pgxpool.Pool) locktest.Locker {
		if n.Add(1)%2 == 0 {
			return advisory{lockcore.New(pool, lockcore.SharedPool())}
		}
		return advisory{lockcore.New(pool)}
	})
}

// leasePostgresCrashStore: a release whose commit the crash lost leaves
// its row behind, held by nobody until its lease passes (lease's package
// doc); the case goes on once it is stale. Short leases keep that short.
func leasePostgresCrashStore(t *testing.T) locktest.CrashStore {
	s := newPGCrashStore(t, func(t *testing.T, pool *pgxpool.Pool) locktest.Locker {
		m, err := lease.OpenPostgres(ctxT(t), pool, crashLeaseOptions)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return leaseL{m}
	})
	s.after = func(t *testing.T, s pgCrashStore, n string) {
		pool := s.pool(t)
		waitFreeOrStale(t, n, leasesource.Postgres("lease", pool, crashLeaseOptions.Schema, false))
	}
	return s
}

// crashLeaseOptions are the lease kinds' options in the crash case: a
// hold that a crash leaves behind is stale soon after.
var crashLeaseOptions = lease.Options{Lease: time.Second, Heartbeat: 100 * time.Millisecond}

// waitFreeOrStale waits until n has no holder but stale ones, which an
// acquire takes over.
func waitFreeOrStale(t *testing.T, n string, src *leasesource.Source) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := src.Poll(ctxT(t))
		if err != nil {
			t.Fatalf("listing the leases: %v", err)
		}
		if !slices.ContainsFunc(snap.Locks, func(in model.Lock) bool { return in.Name == res(n).String() && in.Granted && !in.Stale }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still held 30s after the crash", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// redisCrashStore restarts its Redis empty: with no persistence every key
// and every fence counter is gone, the worst a crash or a failover can do.
type redisCrashStoreT struct{ redisStoreT }

func redisCrashStore(t *testing.T) locktest.CrashStore {
	return redisCrashStoreT{redisStore(t).(redisStoreT)}
}

func (redisCrashStoreT) Checkpoint(*testing.T) {}

func (s redisCrashStoreT) Crash(t *testing.T, _ string) []int64 {
	t.Helper()
	if err := s.srv.Restart(serverCtx(t)); err != nil {
		t.Fatalf("restart: %v", err)
	}
	return nil
}

// leaseSQLiteCrashStoreT kills, with SIGKILL, a process that takes and
// releases the lock in a loop on the same file: killed anywhere, in a
// write transaction or holding the lock, what it committed stays.
type leaseSQLiteCrashStoreT struct{ leaseStoreT }

func leaseSQLiteCrashStore(t *testing.T) locktest.CrashStore {
	return leaseSQLiteCrashStoreT{leaseSQLiteStore(t).(leaseStoreT)}
}

// Checkpoint moves the WAL into the database file, so that the killed
// process's commits are in the WAL alone.
func (s leaseSQLiteCrashStoreT) Checkpoint(t *testing.T) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+s.child.Where+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctxT(t), "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatalf("wal_checkpoint: %v", err)
	}
}

func (s leaseSQLiteCrashStoreT) Crash(t *testing.T, n string) []int64 {
	t.Helper()
	c := s.child
	c.Name, c.Task, c.Lease = n, "grants", crashLeaseOptions.Lease
	cmd := child(t, c)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var fences []int64
	read := func(line string) {
		f, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			t.Fatalf("the crashed process said %q", line)
		}
		fences = append(fences, f)
	}
	for len(fences) < 5 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("the process to crash ended by itself")
			}
			read(line)
		case <-time.After(30 * time.Second):
			t.Fatal("the process to crash made no 5 grants within 30s")
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for line := range lines { // what it printed before it died
		read(line)
	}
	_ = cmd.Wait()
	// A hold it left is taken over once stale.
	waitFreeOrStale(t, n, s.source)
	return fences
}
