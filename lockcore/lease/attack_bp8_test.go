package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Attack tests (bp8) on the Manager's shared alarms (expiry.go).

// TestAttackGrantAsManagerCloses: a grant whose request was in flight as
// its Manager closed (Close lists the locks before the grant is tracked,
// so Close neither releases it nor renews it) still ends when its lease
// runs out: its context is cancelled with ErrLost, as the lock's own
// timer did before the Manager had one expiry alarm. The alarm, stopped
// by Close and armed again by the late grant, fires after Close: it must
// not skip the locks because the Manager is closed.
func TestAttackGrantAsManagerCloses(t *testing.T) {
	t.Parallel()
	e := postgresEnv(t)
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["application_name"] = "lease-bp8-closing"
	})
	m, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Lease: 300 * time.Millisecond, Heartbeat: -1, Schema: e.where.Schema}))
	if err != nil {
		t.Fatal(err)
	}
	r := Map("granted-as-closing")
	release(t, acquire(t, ctxT(t), m, r, Write)) // the resource's row exists
	watch := pgtest.Conn(t)
	tx, err := pgtest.Conn(t).Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxT(t), "SELECT 1 FROM "+e.where.Schema+".dal_resources WHERE lock_id = $1 FOR UPDATE", r.String()); err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := m.TryAcquire(ctxT(t), r, Write)
		done <- result{l, err}
	}()
	pgtest.Eventually(t, "the acquire's request waits for the resource's row", func() bool {
		var n int
		return watch.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'lease-bp8-closing' AND wait_event_type = 'Lock'`).Scan(&n) == nil && n > 0
	})
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("TryAcquire still under way 30s after the row was freed")
	}
	if res.err != nil {
		t.Logf("the grant in flight as the Manager closed failed: %v (nothing to attack)", res.err)
		return
	}
	select {
	case <-res.l.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("a lock granted as its Manager closed: Done still open 30s after its 300ms lease (Err %v)", res.l.Err())
	}
	if cause := context.Cause(res.l.Context()); !errors.Is(cause, ErrLost) {
		t.Errorf("cause %v, want ErrLost", cause)
	}
}

// TestAttackWaitTimeoutError: an Acquire whose wait runs out with the
// resource held fails with an *Error that matches ErrTimeout and
// lockcore.ErrTimeout and wraps no context error (the caller's context
// did not end); one whose caller's deadline ends the wait first matches
// context.DeadlineExceeded, not ErrTimeout (README, Errors). The same on
// main (a context.WithDeadline per wait) and with the Manager's waits
// alarm.
func TestAttackWaitTimeoutError(t *testing.T) {
	t.Parallel()
	e := sqliteEnv(t)
	m := e.open(Options{})
	r := Map("held-for-the-wait")
	holder := acquire(t, ctxT(t), m, r, Write)
	defer release(t, holder)
	_, err := m.Acquire(ctxT(t), r, Write, lockcore.Wait(200*time.Millisecond))
	var le *Error
	if !errors.As(err, &le) || !errors.Is(err, ErrTimeout) || !errors.Is(err, lockcore.ErrTimeout) {
		t.Errorf("wait ran out: %v (%T), want an *Error matching ErrTimeout", err, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("wait ran out: %v wraps a context error", err)
	}
	if le != nil && le.Waited < 200*time.Millisecond {
		t.Errorf("Waited %v, under the 200ms wait", le.Waited)
	}
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	_, err = m.Acquire(ctx, r, Write, lockcore.Wait(time.Minute))
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Errorf("caller's deadline first: %v, want DeadlineExceeded and not ErrTimeout", err)
	}
	if n := m.waits.Len(); n != 0 {
		t.Errorf("%d waits left after both acquires returned", n)
	}
}

// TestAttackWaitAcrossClose: an Acquire waiting as its Manager closes
// returns (ErrTimeout at its wait, or the store's error once closed) and
// leaves nothing in the Manager's waits: Close does not stop the waits'
// alarm.
func TestAttackWaitAcrossClose(t *testing.T) {
	t.Parallel()
	for name, newEnv := range map[string]func(*testing.T) *env{"postgres": postgresEnv, "sqlite": sqliteEnv} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			holderM, m := e.open(Options{Owner: "holder"}), e.open(Options{Owner: "waiter"})
			r := Map("held-across-close")
			holder := acquire(t, ctxT(t), holderM, r, Write)
			defer release(t, holder)
			done := make(chan error, 1)
			go func() {
				_, err := m.Acquire(ctxT(t), r, Write, lockcore.Wait(time.Second))
				done <- err
			}()
			pgtest.Eventually(t, "the acquire to wait", func() bool { return m.waits.Len() == 1 })
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Logf("%s: %v", name, err)
				if err == nil {
					t.Error("granted after its Manager closed")
				}
			case <-time.After(60 * time.Second):
				t.Fatal("Acquire still waiting 60s into a 1s wait, after Close")
			}
			if n := m.waits.Len(); n != 0 {
				t.Errorf("%d waits left", n)
			}
		})
	}
}
