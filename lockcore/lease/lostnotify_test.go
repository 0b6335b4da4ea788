package lease

import (
	"context"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// README.md (Waiting): Acquire "retries with exponential backoff and jitter (16ms
// doubling up to Lease/10, at most 1s) and is woken early by a release".
// A lost wake-up (here: the holder's row removed behind the library's back,
// so no NOTIFY is ever sent) must cost a waiter at most one backoff step:
// min(Lease/10, 1s), plus slack for a loaded machine.
func TestPostgresLostNotifyWaiterRetriesWithinBackoffCap(t *testing.T) {
	t.Parallel() // it mostly sleeps while the backoff grows
	e := postgresEnv(t)
	const lease = 20 * time.Second // cap = min(20s/10, 1s) = 1s, the worst case
	holder := e.open(Options{Owner: "H", Lease: lease, Heartbeat: 10 * time.Second})
	waiter := e.open(Options{Owner: "W", Lease: lease, Wait: 20 * time.Second})
	ctx := ctxT(t)
	r := Map("lost-notify")

	listen := pgtest.Conn(t)
	if _, err := listen.Exec(ctx, "LISTEN "+e.where.Schema); err != nil {
		t.Fatal(err)
	}

	h := acquire(t, ctx, holder, r, Write)
	_ = h // never released through the library
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, r, Write)
		if err != nil {
			errc <- err
			return
		}
		got <- time.Now()
		_ = l.Release(context.Background())
	}()
	pgtest.Eventually(t, "W waits", func() bool { return waiting(t, holder, r, Write) })
	// Let the waiter's backoff grow to its cap.
	time.Sleep(3 * time.Second)

	freed := time.Now()
	e.exec(`DELETE FROM dal_locks WHERE lock_id = $1`, r.String())

	const bound = time.Second + 3*time.Second // cap + generous slack
	select {
	case at := <-got:
		d := at.Sub(freed)
		t.Logf("waiter granted %v after the silent release (cap 1s)", d)
		if d > bound {
			t.Errorf("waiter took %v after a release without NOTIFY, want <= %v", d, bound)
		}
	case err := <-errc:
		t.Fatalf("waiter Acquire: %v", err)
	case <-time.After(bound + 5*time.Second):
		t.Fatalf("waiter not granted %v after a release without NOTIFY (cap 1s)", bound+5*time.Second)
	}

	// Check the test tested what it claims: no NOTIFY arrived before the grant.
	// (Notifications are buffered on the connection; drain with a short timeout.)
	for {
		nctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		n, err := listen.WaitForNotification(nctx)
		cancel()
		if err != nil {
			break
		}
		t.Logf("notification seen: channel %q payload %q", n.Channel, n.Payload)
	}
}
