package lease

import (
	"context"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// A release NOTIFYs only when someone waits: an uncontended release wakes
// no listener, and a waiter (in any process) is always told.
func TestPostgresNotifiesOnlyWaiters(t *testing.T) {
	e := postgresEnv(t)
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	listen := pgtest.Conn(t)
	ctx := ctxT(t)
	if _, err := listen.Exec(ctx, "LISTEN "+e.where.Schema); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := listen.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return n.Payload
	}
	mark := func(s string) {
		t.Helper()
		if _, err := listen.Exec(ctx, "SELECT pg_notify($1, $2)", e.where.Schema, s); err != nil {
			t.Fatal(err)
		}
	}

	r := Map("quiet")
	release(t, acquire(t, ctx, a, r, Write))
	mark("after the quiet release")
	// Notifications arrive in commit order: one from the release would come first.
	if got := next(); got != "after the quiet release" {
		t.Errorf("an uncontended release notified %q", got)
	}

	l := acquire(t, ctx, a, r, Write)
	done := make(chan error, 1)
	go func() {
		w, err := b.Acquire(ctx, r, Write)
		if err == nil {
			err = w.Release(context.Background())
		}
		done <- err
	}()
	pgtest.Eventually(t, "B waits", func() bool { return waiting(t, a, r, Write) })
	release(t, l)
	if got := next(); got != r.String() {
		t.Errorf("the release with a waiter notified %q, want %q", got, r.String())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Issue 31, fault 6: a release of this process that sent no NOTIFY (its
// waiter had joined the hub but not yet written its row) counted an
// "echo", and the next real NOTIFY from another process for the resource
// was dropped as that echo: this process's waiter slept until its backoff.
func TestPostgresEchoCountedOnlyForSentNotify(t *testing.T) {
	e := postgresEnv(t)
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	r := Map("echo")
	ctx := ctxT(t)
	h := a.st.hub()
	early := h.join(r.String(), false) // queued here, no waiter row yet
	release(t, acquire(t, ctx, a, r, Write))
	h.leave(r.String(), early, false)

	l := acquire(t, ctx, b, r, Write)
	waiter := h.join(r.String(), false)
	defer h.leave(r.String(), waiter, false)
	// Its row, as its Acquire writes it: B's release now NOTIFYs.
	e.exec(`INSERT INTO dal_waiters (id, lock_id, mode, owner, since, heartbeat_ts, expires)
		VALUES ('w1', $1, 'write', 'A', now(), now(), now() + interval '1 minute')`, r.String())
	release(t, l)
	select {
	case <-waiter.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("another process's release NOTIFY never woke this process's waiter")
	}
}
