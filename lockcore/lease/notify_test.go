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
