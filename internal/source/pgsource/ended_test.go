package pgsource_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// A session that lets go of its lock stays on the server; one that ends
// does not, and the snapshot says so, with what the server proves of why:
// terminated by this locktop, terminated by pg_terminate_backend from
// elsewhere, or just ended (its client closed it).
func TestPollTellsEndedSessionsAndWhy(t *testing.T) {
	ctx := context.Background()
	m := connect(t, pgtest.DSN(t))
	admin := pgtest.Conn(t)
	pidOf := func(c *pgx.Conn) int32 { return int32(c.PgConn().PID()) }
	exec := func(c *pgx.Conn, sql string) {
		t.Helper()
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(pid int32) {
		t.Helper()
		pgtest.Eventually(t, "backend gone", func() bool {
			var n int
			_ = admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
			return n == 0
		})
	}
	poll := func() model.Snapshot {
		t.Helper()
		s, err := m.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := func(s model.Snapshot, ends ...model.SessionEnd) {
		t.Helper()
		for i := range s.Ended {
			s.Ended[i].Database = "" // the test's database, whatever its name
		}
		if !slices.Equal(s.Ended, ends) {
			t.Fatalf("ended: %+v, want %+v", s.Ended, ends)
		}
	}

	a, b, c, d := pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t)
	exec(a, "SELECT pg_advisory_lock(1, 9001)")
	exec(b, "SELECT pg_advisory_lock(1, 9002)")
	exec(c, "SELECT pg_advisory_lock(1, 9003)")
	pd := pidOf(d)
	waited := make(chan error, 1)
	go func() { _, err := d.Exec(ctx, "SELECT pg_advisory_lock(1, 9001)"); waited <- err }()
	pgtest.Eventually(t, "d waits", func() bool {
		s := poll()
		for _, l := range s.Locks {
			if l.PID == pd && !l.Granted {
				return true
			}
		}
		return false
	})
	want(poll())

	// b unlocks and lives on; c's client closes the session.
	exec(b, "SELECT pg_advisory_unlock(1, 9002)")
	pc := pidOf(c)
	c.Close(ctx)
	gone(pc)
	want(poll(), model.SessionEnd{PID: pc, Cause: model.EndEnded})

	// d, waiting, is terminated from another session.
	exec(admin, "SELECT pg_terminate_backend("+strconv.Itoa(int(pd))+")")
	<-waited
	gone(pd)
	want(poll(), model.SessionEnd{PID: pd, Cause: model.EndTerminated})

	// a, holding, is terminated by this locktop.
	pa := pidOf(a)
	if err := m.Terminate(ctx, pa); err != nil {
		t.Fatal(err)
	}
	gone(pa)
	want(poll(), model.SessionEnd{PID: pa, Cause: model.EndTerminated, By: model.ByLocktop})
	want(poll())
}
