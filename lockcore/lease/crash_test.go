package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// TestRenewalSurvivesACrash: on a server that commits asynchronously, a
// crash must not take back a lease the heartbeat renewed. If it did, the
// row would come back with the grant's first, long-passed lease while the
// holder's local deadline still counts from its last renewal: a second
// acquire would take the lock over while the first holder still believes
// it holds (its local deadline, the database's clock being the one that
// decides, must never outlast the lease the database keeps).
func TestRenewalSurvivesACrash(t *testing.T) {
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
	const lease = 1500 * time.Millisecond
	opts := Options{Lease: lease, Heartbeat: 100 * time.Millisecond, Grace: time.Millisecond, Wait: 300 * time.Millisecond}
	pa := pool()
	a, err := OpenPostgres(ctxT(t), pa, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	l, err := a.Acquire(ctxT(t), Map("m1"), Write)
	if err != nil {
		t.Fatal(err)
	}
	// Crash once the grant's own lease has passed on the database's clock
	// and only the heartbeat's renewals keep the row alive.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var renewed bool
		err := pa.QueryRow(ctxT(t), `SELECT now() > granted_at + $1 * interval '1 microsecond' AND lease_expires > now()
FROM `+DefaultSchema+`.dal_locks WHERE token = $2`, lease.Microseconds(), l.token).Scan(&renewed)
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
	if err := c.Crash(ctxT(t)); err != nil {
		t.Fatalf("crash: %v", err)
	}
	b, err := OpenPostgres(ctxT(t), pool(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	lb, err := b.Acquire(ctxT(t), Map("m1"), Write)
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
}
