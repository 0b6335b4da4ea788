package lease

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/lockcore"
)

// TestCrash crashes a PostgreSQL server that commits asynchronously (the
// setting under which a crash loses the last commits; a walwriter that
// wakes every 10s leaves them all in its buffers) right after the store
// reported something done. What it reported must survive. One server for
// the cases, a schema each: a server of its own costs seconds.
// Parallel: its time is mostly the server starting, crashing and
// recovering, which the other tests can use the CPU during.
func TestCrash(t *testing.T) {
	t.Parallel()
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "off", "wal_writer_delay": "10s", "autovacuum": "off",
	}})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	pool := func(t *testing.T) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(c.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 4
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	open := func(t *testing.T, p *pgxpool.Pool, o Options) *Manager {
		m, err := OpenPostgres(ctxT(t), p, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	crash := func(t *testing.T) {
		if err := c.Crash(ctxT(t)); err != nil {
			t.Fatalf("crash: %v", err)
		}
	}

	// A crash must not take back a lease the heartbeat renewed. If it did,
	// the row would come back with the grant's first, long-passed lease
	// while the holder's local deadline still counts from its last
	// renewal: a second acquire would take the lock over while the first
	// holder still believes it holds (its local deadline must never
	// outlast the lease the database keeps).
	t.Run("renewal", func(t *testing.T) {
		const lease = time.Second
		opts := Options{Schema: "crash_renewal", Lease: lease, Heartbeat: 100 * time.Millisecond, Grace: time.Millisecond,
			Wait: 300 * time.Millisecond}
		pa := pool(t)
		// Nobody holds m1: the wait is generous (a loaded machine's first
		// batch took over opts.Wait), only b's below is short.
		l, err := open(t, pa, opts).Acquire(ctxT(t), Map("m1"), Write, lockcore.Wait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// Crash once the grant's own lease has passed on the database's
		// clock and only the heartbeat's renewals keep the row alive.
		deadline := time.Now().Add(20 * time.Second)
		for {
			var renewed bool
			err := pa.QueryRow(ctxT(t), `SELECT now() > granted_at + $1 * interval '1 microsecond' AND lease_expires > now()
FROM crash_renewal.dal_locks WHERE token = $2`, lease.Microseconds(), l.token).Scan(&renewed)
			if err != nil {
				t.Fatal(err)
			}
			if renewed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the heartbeat never kept the lease past the grant's own")
			}
			time.Sleep(20 * time.Millisecond)
		}
		crash(t)
		lb, err := open(t, pool(t), opts).Acquire(ctxT(t), Map("m1"), Write)
		granted := time.Now()
		if errors.Is(err, ErrTimeout) {
			if l.Err() != nil {
				t.Fatalf("b was refused yet a lost its lock: %v", l.Err())
			}
			return // a holds and renews; b waits, as it must
		}
		if err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		until := l.deadline
		l.mu.Unlock()
		if until.After(granted) {
			t.Fatalf("b was granted fence %d while a (fence %d) still believed it held for %v more: the crash took back a's renewed lease",
				lb.Fence(), l.Fence(), until.Sub(granted))
		}
	})

	// A job reported started must still be running after a crash: if the
	// crash took its start (or its queue row) back, a second job would
	// start beside it, over MaxGlobalJobs, while the first still runs.
	t.Run("job start", func(t *testing.T) {
		opts := Options{Schema: "crash_job", Lease: 5 * time.Second, MaxGlobalJobs: 1}
		x, err := open(t, pool(t), opts).StartJob(ctxT(t), Job{ID: "x", Project: "p"})
		if err != nil {
			t.Fatal(err)
		}
		crash(t)
		ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
		defer cancel()
		y, err := open(t, pool(t), opts).StartJob(ctx, Job{ID: "y", Project: "p"})
		if err == nil {
			t.Fatalf("job y started while job x (err %v) runs, with MaxGlobalJobs 1: the crash took x's start back", x.Err())
		}
		if !errors.Is(err, context.DeadlineExceeded) || x.Err() != nil {
			t.Fatalf("y: %v (want a deadline: x runs); x: %v", err, x.Err())
		}
		_ = y
	})

	// A job's end and a stale recovery must survive a crash too: a Finish
	// the crash took back would bring the job back, running, holding its
	// slot (with MaxGlobalJobs 1, every other job's) and refusing its ID
	// until its lease passed; a recovery the crash took back would take
	// its audit record with it, though the caller was told the holder was
	// recovered (seed 004 §8.2: every force-release is in the audit
	// trail). One crash for both, so the recovery, which comes first, is
	// checked as well right when it returns: its commit must already be
	// flushed (the WAL is one stream, and Finish's flush would carry the
	// recovery's commit to disk too and hide its loss). Nothing else
	// writes meanwhile: no heartbeats, no other holders.
	t.Run("finish and recovery", func(t *testing.T) {
		opts := Options{Schema: "crash_finish", Lease: 5 * time.Second, Heartbeat: -1, MaxGlobalJobs: 1}
		x, err := open(t, pool(t), opts).StartJob(ctxT(t), Job{ID: "x", Project: "p"})
		if err != nil {
			t.Fatal(err)
		}
		r := Map("m1")
		if _, err := open(t, pool(t), Options{Schema: "crash_recover", Owner: "A", Lease: 50 * time.Millisecond, Heartbeat: -1}).
			Acquire(ctxT(t), r, Write); err != nil {
			t.Fatal(err)
		}
		pb := pool(t)
		b := open(t, pb, Options{Schema: "crash_recover", Owner: "B", Grace: 10 * time.Millisecond})
		aged(t, b, r, true, 20*time.Millisecond)
		if ok, err := b.RecoverStale(ctxT(t), r, "admin", "crash test"); !ok || err != nil {
			t.Fatalf("RecoverStale of a stale holder: %v, %v", ok, err)
		}
		var flushed bool
		if err := pb.QueryRow(ctxT(t), `SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()`).Scan(&flushed); err != nil {
			t.Fatal(err)
		}
		if !flushed {
			t.Error("RecoverStale returned before its commit (the audit record) was flushed to the WAL")
		}
		if err := x.Finish(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		crash(t)
		recs, err := open(t, pool(t), Options{Schema: "crash_recover"}).Audit(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Actor != "admin" || recs[0].VictimOwner != "A" {
			t.Errorf("after the crash the audit holds %+v, want the one recovery RecoverStale reported", recs)
		}
		ctx, cancel := context.WithTimeout(ctxT(t), 2*time.Second)
		defer cancel()
		y, err := open(t, pool(t), opts).StartJob(ctx, Job{ID: "y", Project: "p"})
		if err != nil {
			t.Fatalf("job y could not start after x finished (MaxGlobalJobs 1): %v: the crash took x's end back", err)
		}
		_ = y.Finish(ctxT(t))
	})

	// Metadata a holder was told is set must survive a crash too: the
	// holder goes on holding (its grant and renewals are durable), and a
	// crash that took the update back would show monitors an older context
	// than the holder last gave, with nobody told. Checked as it returns, no crash needed: its commit
	// must already be flushed (nothing else writes: no heartbeats).
	t.Run("metadata", func(t *testing.T) {
		p := pool(t)
		l, err := open(t, p, Options{Schema: "crash_metadata", Heartbeat: -1}).Acquire(ctxT(t), Map("m1"), Write)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.SetMetadata(ctxT(t), map[string]any{"step": 2}); err != nil {
			t.Fatal(err)
		}
		var flushed bool
		if err := p.QueryRow(ctxT(t), `SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()`).Scan(&flushed); err != nil {
			t.Fatal(err)
		}
		if !flushed {
			t.Error("SetMetadata returned before its commit was flushed to the WAL")
		}
	})

	// An upgrade mints a fence as a grant does (README.md: "a transaction
	// that grants (or upgrades) commits with synchronous_commit on"): a
	// crash that took it back would hand that fence out again. Checked as
	// it returns, no crash needed, as for metadata: nothing else writes.
	t.Run("upgrade", func(t *testing.T) {
		p := pool(t)
		l, err := open(t, p, Options{Schema: "crash_upgrade", Heartbeat: -1}).Acquire(ctxT(t), Map("m1"), Upgradeable)
		if err != nil {
			t.Fatal(err)
		}
		before := l.Fence()
		if err := l.Upgrade(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= before {
			t.Fatalf("fence after the upgrade %d, want above %d", l.Fence(), before)
		}
		var flushed bool
		if err := p.QueryRow(ctxT(t), `SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()`).Scan(&flushed); err != nil {
			t.Fatal(err)
		}
		if !flushed {
			t.Error("Upgrade returned before its commit (the new fence) was flushed to the WAL")
		}
	})
	// A version WriteAtomic reported committed must stay the committed one
	// after a crash: the write deletes the version it superseded, so a
	// crash that took the commit back would leave the manifest naming a
	// deleted directory.
	t.Run("atomic write", func(t *testing.T) {
		m := open(t, pool(t), Options{Schema: "crash_atomic"})
		dir := t.TempDir()
		for _, v := range []string{"v1", "v2"} {
			l, err := m.Acquire(ctxT(t), Map("m1"), Write)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.WriteAtomic(ctxT(t), AtomicWrite{Dir: dir, Name: "tiles", Fill: fillVersion(v)}); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		crash(t)
		e, ok, err := open(t, pool(t), Options{Schema: "crash_atomic"}).Manifest(ctxT(t), Map("m1"), "tiles")
		if err != nil || !ok {
			t.Fatalf("manifest after the crash: %v, %v", ok, err)
		}
		if _, err := os.Stat(e.Path); err != nil {
			t.Fatalf("after the crash the manifest names %s (fence %d), which the second write deleted: %v", e.Path, e.Fence, err)
		}
	})
}
