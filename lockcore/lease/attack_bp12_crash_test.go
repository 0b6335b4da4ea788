//go:build attack

package lease

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// TestAttackCrashWithHolderAndWaiter: a PostgreSQL server that commits
// asynchronously crashes (immediate stop: SIGQUIT, no checkpoint) while a
// holder renews its lock and another Manager's Acquire waits for it. That
// Acquire may end with the driver's error (the README promises no wait
// across a server's restart); it must not be granted. After the restart
// there are never two holders: a waiter is not granted while the holder,
// whose grant and renewals are durable, still believes it holds; once the
// holder releases, the waiter gets the lock within its poll bound (the
// waiter Manager's LISTEN went with the crash), fence higher.
func TestAttackCrashWithHolderAndWaiter(t *testing.T) {
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{Settings: map[string]string{
		"synchronous_commit": "off", "wal_writer_delay": "10s", "autovacuum": "off",
	}})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	pool := func() *pgxpool.Pool {
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
	// A lease long enough to outlast the server's restart on a loaded box:
	// the holder keeps its lock across the crash by its renewals.
	const lease = 30 * time.Second
	opts := Options{Schema: "bp12_crash", Lease: lease, Heartbeat: 200 * time.Millisecond, Wait: 2 * time.Minute}
	open := func() *Manager {
		m, err := OpenPostgres(ctxT(t), pool(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	ma, mb := open(), open()
	admin := pool()
	a, err := ma.Acquire(ctxT(t), Map("m1"), Write)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		l   *Lock
		err error
		at  time.Time
	}
	got := make(chan grant, 1)
	go func() {
		l, err := mb.Acquire(context.Background(), Map("m1"), Write)
		got <- grant{l, err, time.Now()}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(ctxT(t), `SELECT count(*) FROM bp12_crash.dal_waiters`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not queue within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Crash(ctxT(t)); err != nil {
		t.Fatalf("crash: %v", err)
	}
	t.Logf("crashed and back")
	// Until the holder has renewed on the restarted server (its lease
	// re-read from the database) the waiter must stay refused.
	deadline = time.Now().Add(60 * time.Second)
	for {
		var renewed bool
		err := admin.QueryRow(ctxT(t), `SELECT heartbeat_ts > now() - interval '1 second' FROM bp12_crash.dal_locks WHERE token = $1`, a.token).Scan(&renewed)
		if err == nil && renewed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder's row not renewed within 60s of the restart (%v); holder's Err %v", err, a.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.Err(); err != nil {
		t.Fatalf("the holder lost its lock across the crash: %v", err)
	}
	// The waiter: granted is a second holder; an error is the crash's,
	// and a new Acquire on the same Manager waits in its place.
	wait := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var n int
			if err := admin.QueryRow(ctxT(t), `SELECT count(*) FROM bp12_crash.dal_waiters WHERE expires > now()`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the waiter did not queue within 30s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	select {
	case g := <-got:
		if g.err == nil {
			t.Fatalf("the waiter was granted (fence %d) while the holder (fence %d, err %v) holds", g.l.Fence(), a.Fence(), a.Err())
		}
		t.Logf("the waiter's Acquire across the crash: %v; waiting again", g.err)
		go func() {
			l, err := mb.Acquire(context.Background(), Map("m1"), Write)
			got <- grant{l, err, time.Now()}
		}()
	default:
		t.Logf("the waiter's Acquire goes on across the crash")
	}
	wait()
	if err := a.Err(); err != nil {
		t.Fatalf("the holder lost its lock: %v", err)
	}
	if err := a.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	select {
	case g := <-got:
		if g.err != nil {
			t.Fatalf("the waiter after the holder's release: %v", g.err)
		}
		t.Logf("the waiter got the lock %v after the release, fence %d after %d", g.at.Sub(released), g.l.Fence(), a.Fence())
		if g.l.Fence() <= a.Fence() {
			t.Errorf("the waiter's fence %d not above the holder's %d", g.l.Fence(), a.Fence())
		}
		_ = g.l.Release(ctxT(t))
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter did not get the lock 20s after the holder's release (its poll bound is 1s)")
	}
}

func fenceOf(l *Lock) int64 {
	if l == nil {
		return 0
	}
	return l.Fence()
}
