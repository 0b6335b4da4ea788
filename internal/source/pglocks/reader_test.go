package pglocks_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// A Reader reuses the last read's sorted order only while the server sends
// the same rows: here the second read sees the same locks, the third as many
// locks but one of them another key, which must come back in its place.
func TestReaderReusesOrderOnlyWhenUnchanged(t *testing.T) {
	ctx := context.Background()
	c, mon := pgtest.Conn(t), pgtest.Conn(t)
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(4242, k) FROM unnest(ARRAY[5, 1, 9, 7]) k"); err != nil {
		t.Fatal(err)
	}
	var rd pglocks.Reader
	ids := func(tb pglocks.Table) (out []int32) {
		for _, r := range tb.Rows {
			if r.Key.IsPair() && r.Key.Space() == 4242 {
				out = append(out, int32(r.Key.Int64()))
			}
		}
		return out
	}
	read := func(want ...int32) {
		t.Helper()
		got, err := rd.Read(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := pglocks.Read(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), want) || !slices.Equal(ids(fresh), want) {
			t.Fatalf("Reader read keys %v, Read %v, want %v", ids(got), ids(fresh), want)
		}
	}
	read(1, 5, 7, 9)
	read(1, 5, 7, 9)
	if _, err := c.Exec(ctx, "SELECT pg_advisory_unlock(4242, 9), pg_advisory_lock(4242, 3)"); err != nil {
		t.Fatal(err)
	}
	read(1, 3, 5, 7)
}

// A Reader gives a session the server shows unchanged the *Backend of the
// last read (a poll of an unchanged server allocates no session), and a
// session that changed a new one with what it shows now.
func TestReaderKeepsUnchangedSessions(t *testing.T) {
	ctx := context.Background()
	idle, busy, mon := pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t)
	var idlePID, busyPID int32
	for _, c := range []struct {
		conn interface {
			QueryRow(context.Context, string, ...any) pgx.Row
		}
		pid *int32
		key int
	}{{idle, &idlePID, 1}, {busy, &busyPID, 2}} {
		if err := c.conn.QueryRow(ctx, "SELECT pg_backend_pid() FROM pg_advisory_lock(4243, $1::int)", c.key).Scan(c.pid); err != nil {
			t.Fatal(err)
		}
	}
	var rd pglocks.Reader
	first, err := rd.Read(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	idleB, busyB := first.Backends[idlePID], first.Backends[busyPID]
	if idleB == nil || busyB == nil {
		t.Fatalf("the first read lacks a session: %v", first.Backends)
	}
	if _, err := busy.Exec(ctx, "SELECT 'the busy session ran this'"); err != nil {
		t.Fatal(err)
	}
	second, err := rd.Read(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	if second.Backends[idlePID] != idleB {
		t.Errorf("the unchanged session has a new *Backend: %+v, was %+v", second.Backends[idlePID], idleB)
	}
	if b := second.Backends[busyPID]; b == busyB || !strings.Contains(b.Query, "the busy session ran this") {
		t.Errorf("the session that ran a statement: %+v (the first read's: %p, now %p)", b, busyB, b)
	}
	if !strings.Contains(busyB.Query, "pg_advisory_lock") {
		t.Errorf("the first read's session was written since: %+v", busyB)
	}
}
