//go:build attack

package lease

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// TestAttackSameResourceTwoDatabases: one resource under one schema in two
// databases of one server is two locks. The NOTIFY channel is the schema's
// name, the same in both, but NOTIFY is per database: a holder in each at
// once; a waiter in the first is not granted by the second's release, and
// gets the lock once the first's holder releases, fence higher.
func TestAttackSameResourceTwoDatabases(t *testing.T) {
	pool := func(db string) *pgxpool.Pool {
		p, err := pgxpool.New(context.Background(), pgtest.Database(t, db))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	open := func(p *pgxpool.Pool) *Manager {
		m, err := OpenPostgres(ctxT(t), p, testOptions(Options{Schema: "bp12_same", Wait: time.Minute}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	admin, poolTwo := pool("bp12_dbs_one"), pool("bp12_dbs_two")
	one, two := open(admin), open(poolTwo)
	oneWaiter := open(admin) // a Manager of its own: woken by NOTIFY, not in-process
	r := Map("m1")
	a, err := one.Acquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatal(err)
	}
	b, err := two.TryAcquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatalf("the second database's try while the first's holds: %v", err)
	}
	got := make(chan *Lock, 1)
	werr := make(chan error, 1)
	go func() {
		l, err := oneWaiter.Acquire(context.Background(), r, Write)
		if err != nil {
			werr <- err
			return
		}
		got <- l
	}()
	pgtest.Eventually(t, "the first database's waiter queued", func() bool {
		var n int
		if err := admin.QueryRow(ctxT(t), `SELECT count(*) FROM bp12_same.dal_waiters`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	// The second database: a release (its NOTIFY on the same channel
	// name), a grant and another release, so any wake-up it sends has come.
	if err := b.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b2, err := two.TryAcquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatalf("the second database's try after its release: %v", err)
	}
	if err := b2.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		t.Fatalf("the first database's waiter granted (fence %d) while its holder holds (Err %v)", l.Fence(), a.Err())
	case err := <-werr:
		t.Fatalf("the first database's waiter: %v", err)
	default:
	}
	if err := a.Err(); err != nil {
		t.Fatalf("the first database's holder: %v", err)
	}
	if err := a.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l.Fence() <= a.Fence() {
			t.Errorf("the waiter's fence %d not above its database's holder's %d", l.Fence(), a.Fence())
		}
		_ = l.Release(ctxT(t))
	case err := <-werr:
		t.Fatalf("the first database's waiter after its holder's release: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first database's waiter did not get the lock 30s after its holder's release")
	}
}
