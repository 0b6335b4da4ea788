package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// These tests stand, with a transaction of their own, for an acquire in
// flight on PostgreSQL while a release runs, and check that the two take
// turns on the resource's row.

// releaseWaits starts l's Release and returns its result channel once the
// release is blocked on a row lock of the test's schema (or, when the
// release does not wait, once it is done).
func releaseWaits(t *testing.T, e *env, l *Lock) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- l.Release(context.Background()) }()
	watch := pgtest.Conn(t)
	pgtest.Eventually(t, "the release waits on the resource's row, or is done", func() bool {
		if len(done) > 0 {
			return true
		}
		var n int
		if err := watch.QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '.%'`, e.where.Schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	return done
}

// A waiter whose fast acquire is in flight (the resource's row bumped, its
// waiter row written, not yet committed) as the holder releases must be
// woken: the release waits for that commit and then sees the waiter row.
// A release that did not wait for it would find no waiter, send no NOTIFY,
// and leave the waiter to its backoff.
func TestPostgresReleaseWakesWaiterInFlight(t *testing.T) {
	e := postgresEnv(t)
	a := e.open(Options{Owner: "A"})
	ctx := ctxT(t)
	r := Map("inflight")
	l := acquire(t, ctx, a, r, Write)

	listen := pgtest.Conn(t)
	if _, err := listen.Exec(ctx, "LISTEN "+e.where.Schema); err != nil {
		t.Fatal(err)
	}
	tx, err := pgtest.Conn(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	q := func(s string) string { return inSchema(e.where.Schema, s) }
	if _, err := tx.Exec(ctx, q(pgBumpResource), r.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, q(pgUpsertWaiter), "w-inflight", r.String(), "write", "B", time.Minute.Microseconds()); err != nil {
		t.Fatal(err)
	}

	done := releaseWaits(t, e, l)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := listen.Exec(ctx, "SELECT pg_notify($1, 'mark')", e.where.Schema); err != nil {
		t.Fatal(err)
	}
	// Notifications arrive in commit order: the release's comes first.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := listen.WaitForNotification(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != r.String() {
		t.Errorf("first notification %q, want the release's %q: the waiter committed during the release was not woken", n.Payload, r.String())
	}
}

// A release that races the stale recovery of its own grant must not
// deadlock with it: the recovery holds the resource's row and deletes the
// grant, the release waits for the row before touching the grant, then
// finds it gone (ErrLost). A release that deleted the grant first and then
// waited for the row would deadlock with the recovery's delete.
func TestPostgresReleaseDuringRecovery(t *testing.T) {
	e := postgresEnv(t)
	a := e.open(Options{Owner: "A"})
	ctx := ctxT(t)
	r := Map("recovered")
	l := acquire(t, ctx, a, r, Write)

	tx, err := pgtest.Conn(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	q := func(s string) string { return inSchema(e.where.Schema, s) }
	if _, err := tx.Exec(ctx, q(pgLockResource), r.String()); err != nil { // as an attempt does
		t.Fatal(err)
	}
	done := releaseWaits(t, e, l)
	tag, err := tx.Exec(ctx, q(`DELETE FROM {s}.dal_locks WHERE token = $1`), l.token) // as pgVictim does
	if err != nil {
		t.Fatalf("the recovery's delete: %v", err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("the recovery deleted %d rows, want the grant", tag.RowsAffected())
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrLost) {
		t.Fatalf("Release of a grant recovered meanwhile: %v, want ErrLost", err)
	}
}
