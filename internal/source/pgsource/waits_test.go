package pgsource_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// rowsOfLabel filters a snapshot to the rows of one kind and key label.
func rowsOfLabel(snap model.Snapshot, kind model.Kind, label string) []model.Lock {
	var out []model.Lock
	for _, l := range snap.Locks {
		if l.Kind == kind && l.KeyLabel() == label {
			out = append(out, l)
		}
	}
	return out
}

// begin opens a transaction on a connection of its own that runs sql and
// stays open until the test ends; it returns the connection's pid.
func begin(t *testing.T, sql string) int32 {
	t.Helper()
	c := pgtest.Conn(t)
	var pid int32
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
	return pid
}

// blocked runs sql on a connection of its own, where it is expected to
// wait, and returns the pid once the monitor shows the wait under label.
func blocked(t *testing.T, mon *pgx.Conn, kind model.Kind, label, app, sql string) int32 {
	t.Helper()
	c := pgtest.Conn(t)
	var pid int32
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(context.Background(), "SET application_name = '"+app+"'"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Exec(ctx, sql)
	}()
	t.Cleanup(func() { cancel(); <-done })
	pgtest.Eventually(t, app+" waits", func() bool {
		snap, err := pgsource.Inspect(context.Background(), mon)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(rowsOfLabel(snap, kind, label), func(l model.Lock) bool { return l.PID == pid && !l.Granted })
	})
	return pid
}

// A SELECT … FOR UPDATE waiter shows as a row lock wait on the row, named
// by its relation and tuple id, with the transaction holding the row as
// its blocker; a second waiter (waiting on the tuple lock the first holds)
// queues behind it in the same row's queue, blocked by the same holder,
// not by the first waiter.
func TestInspectRowLockWaits(t *testing.T) {
	mon := pgtest.Conn(t)
	ctx := context.Background()
	rows := table("turns_rows")
	if _, err := mon.Exec(ctx, "CREATE TABLE "+rows+" (id int PRIMARY KEY, v int); INSERT INTO "+rows+" SELECT g, 0 FROM generate_series(1, 5) g"); err != nil {
		t.Fatal(err)
	}
	db := currentDB(t, mon)
	var ctid string
	if err := mon.QueryRow(ctx, "SELECT ctid::text FROM "+rows+" WHERE id = 3").Scan(&ctid); err != nil {
		t.Fatal(err)
	}
	label := "public." + rows + " row " + ctid
	forUpdate := "SELECT * FROM " + rows + " WHERE id = 3 FOR UPDATE"
	holder := begin(t, forUpdate)
	w1 := blocked(t, mon, model.KindRow, label, "waiter-1", forUpdate)
	w2 := blocked(t, mon, model.KindRow, label, "waiter-2", forUpdate)

	snap, err := pgsource.Inspect(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	got := rowsOfLabel(snap, model.KindRow, label)
	if len(got) != 3 {
		t.Fatalf("rows of %s: %+v", label, got)
	}
	h := got[0]
	if !h.Granted || h.PID != holder || h.Database != db || h.Relation != "public."+rows || h.Row != ctid || h.QueuePos != 0 {
		t.Errorf("holder row %+v, want pid %d holding", h, holder)
	}
	for i, want := range []int32{w1, w2} {
		w := got[i+1]
		if w.Granted || w.PID != want || w.QueuePos != i+1 || !slices.Equal(w.BlockedBy, []int32{holder}) ||
			w.WaitStart.IsZero() || w.Waited(snap.Taken) < 0 || w.Mode == "" || w.Session().ApplicationName != "waiter-"+string(rune('1'+i)) {
			t.Errorf("waiter %d row %+v; want pid %d, #%d, blocked by [%d]", i+1, w, want, i+1, holder)
		}
	}
	// The advisory document's rows are not disturbed by them.
	for _, l := range snap.Locks {
		if l.Kind == model.KindAdvisory && (l.PID == w1 || l.PID == w2) {
			t.Errorf("a row lock waiter as an advisory lock: %+v", l)
		}
	}
}

// A relation lock wait (LOCK TABLE behind a transaction that read the
// table) shows with the relation's name, the waiter's mode and the holder
// in a conflicting mode as its blocker.
func TestInspectRelationLockWait(t *testing.T) {
	mon := pgtest.Conn(t)
	ctx := context.Background()
	rel := table("turns_rel")
	if _, err := mon.Exec(ctx, "CREATE TABLE "+rel+" (id int)"); err != nil {
		t.Fatal(err)
	}
	holder := begin(t, "SELECT * FROM "+rel)
	w := blocked(t, mon, model.KindRelation, "public."+rel, "locker", "BEGIN; LOCK TABLE "+rel+" IN ACCESS EXCLUSIVE MODE; COMMIT")
	snap, err := pgsource.Inspect(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsOfLabel(snap, model.KindRelation, "public."+rel)
	if len(rows) != 2 {
		t.Fatalf("rows: %+v", rows)
	}
	if h := rows[0]; !h.Granted || h.PID != holder || h.Mode != "AccessShareLock" || h.LockType != "relation" {
		t.Errorf("holder row %+v", h)
	}
	if r := rows[1]; r.Granted || r.PID != w || r.Mode != "AccessExclusiveLock" || r.QueuePos != 1 ||
		!slices.Equal(r.BlockedBy, []int32{holder}) || r.Waited(snap.Taken) < 0 {
		t.Errorf("waiter row %+v", r)
	}
}
