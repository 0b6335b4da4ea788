package pgsource_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model/waitfor"
)

// A deadlock inside one server, on advisory locks: with deadlock_timeout
// raised to 10 s, the monitor's polls report the cycle (seen in two polls
// in a row) before the server breaks it, and mark it as one the server
// will resolve; then the server cancels one side (40P01).
func TestServerDeadlockReportedAndMarked(t *testing.T) {
	ctx := context.Background()
	mon := pgtest.Conn(t)
	a, b := pgtest.Conn(t), pgtest.Conn(t)
	for _, c := range []*pgx.Conn{a, b} {
		if _, err := c.Exec(ctx, "SET deadlock_timeout = '10s'"); err != nil {
			t.Fatal(err)
		}
	}
	k1, k2 := freshAgent(), freshAgent()
	if _, err := a.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", k1.Space(), k1.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", k2.Space(), k2.ID()); err != nil {
		t.Fatal(err)
	}
	type ended struct {
		c   *pgx.Conn
		err error
	}
	errs := make(chan ended, 2)
	go func() {
		_, err := a.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", k2.Space(), k2.ID())
		errs <- ended{a, err}
	}()
	go func() {
		_, err := b.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", k1.Space(), k1.ID())
		errs <- ended{b, err}
	}()
	ours := []waitfor.Session{{PID: int32(a.PgConn().PID())}, {PID: int32(b.PgConn().PID())}}
	slices.SortFunc(ours, func(x, y waitfor.Session) int { return int(x.PID - y.PID) })

	var det waitfor.Detector
	var got *waitfor.Cycle
	deadline := time.Now().Add(9 * time.Second) // before the server's 10 s (5 s left a loaded box's polls little room)
	for got == nil && time.Now().Before(deadline) {
		snap, err := pgsource.Inspect(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		_, fresh := det.Observe(waitfor.Build(&snap))
		for i := range fresh {
			if slices.Equal(fresh[i].Sessions, ours) {
				got = &fresh[i]
			}
		}
		time.Sleep(200 * time.Millisecond) // the poll interval
	}
	if got == nil {
		t.Fatal("the server's deadlock was not reported within 9 s")
	}
	if !got.ServerResolves || got.KindsLabel() != "advisory" || len(got.Edges) != 2 {
		t.Errorf("cycle %+v: want two advisory waits, marked as resolved by the server", got)
	}
	// The server breaks it: one side fails with deadlock_detected.
	var pe *pgconn.PgError
	select {
	case e := <-errs:
		if !errors.As(e.err, &pe) || pe.Code != "40P01" {
			t.Errorf("first wait ended with %v, want 40P01", e.err)
		}
		// The victim still holds its first lock (session locks outlive an
		// error): it lets go, and the other side gets it.
		if _, err := e.c.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second): // a guard: the server's 10 s, and room
		t.Fatal("the server did not break its deadlock")
	}
	if e := <-errs; e.err != nil {
		t.Errorf("the survivor: %v", e.err)
	}
}
