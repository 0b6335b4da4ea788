package pgsource_test

import (
	"context"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// The classic DDL pile-up: a transaction that read orders_pile runs a
// long statement, an ALTER TABLE queues behind it, three SELECTs queue
// behind the ALTER. A locktop started late (a fresh Monitor's first poll,
// and a one-shot Inspect) must not show the culprit as the most harmless
// session on the screen: it has held its lock at least as long as the ALTER
// has waited, and carries its transaction's start, which bounds the hold
// from above.
func TestHeldTimeOfDDLPileUp(t *testing.T) {
	mon := pgtest.Conn(t)
	ctx := context.Background()
	orders := table("orders_pile")
	if _, err := mon.Exec(ctx, "CREATE TABLE "+orders+" (id int)"); err != nil {
		t.Fatal(err)
	}
	rep := pgtest.Conn(t)
	var holder int32
	if err := rep.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&holder); err != nil {
		t.Fatal(err)
	}
	tx, err := rep.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var txStart time.Time
	if err := tx.QueryRow(ctx, "SELECT now() FROM (SELECT count(*) FROM "+orders+") c").Scan(&txStart); err != nil {
		t.Fatal(err)
	}
	// The long report, still running while the queue builds behind it.
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := tx.Exec(rctx, "SELECT count(*), pg_sleep(600) FROM "+orders); rctx.Err() == nil {
			t.Errorf("the report ended early: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	pgtest.Eventually(t, "the report runs", func() bool {
		var state string
		if err := mon.QueryRow(ctx, "SELECT state FROM pg_stat_activity WHERE pid = $1", holder).Scan(&state); err != nil {
			t.Fatal(err)
		}
		return state == "active"
	})

	label := "public." + orders
	alter := blocked(t, mon, model.KindRelation, label, "migration", "ALTER TABLE "+orders+" ADD COLUMN note text")
	for _, app := range []string{"select-1", "select-2", "select-3"} {
		blocked(t, mon, model.KindRelation, label, app, "SELECT * FROM "+orders)
	}
	// Let the ALTER wait long enough that a bound counted from the poll
	// would read visibly less.
	pgtest.Eventually(t, "the ALTER has waited 1.5s", func() bool {
		snap, err := pgsource.Inspect(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range rowsOfLabel(snap, model.KindRelation, label) {
			if l.PID == alter && !l.Granted {
				return l.Waited(snap.Taken) >= 1500*time.Millisecond
			}
		}
		return false
	})

	check := func(who string, snap model.Snapshot) {
		t.Helper()
		var h, w *model.Lock
		rows := rowsOfLabel(snap, model.KindRelation, label)
		for i := range rows {
			switch l := &rows[i]; {
			case l.PID == holder && l.Granted:
				h = l
			case l.PID == alter && !l.Granted:
				w = l
			}
		}
		if h == nil || w == nil {
			t.Fatalf("%s: no holder %d or waiter %d in %+v", who, holder, alter, rows)
		}
		now := snap.Taken
		if h.Held(now) < w.Waited(now) {
			t.Errorf("%s: the holder reads held %v, less than the %v the ALTER it blocks has waited", who, h.Held(now), w.Waited(now))
		}
		if !h.Session().XactStart.Equal(txStart) {
			t.Errorf("%s: the holder's transaction start %v, want %v", who, h.Session().XactStart, txStart)
		}
		if h.HeldSince.IsZero() || h.HeldSince.Before(h.Session().XactStart) {
			t.Errorf("%s: held since %v, before its transaction began at %v", who, h.HeldSince, h.Session().XactStart)
		}
	}
	snap, err := pgsource.Inspect(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	check("Inspect", snap)
	late := connect(t, pgtest.DSN(t))
	snap, err = late.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("a late Monitor's first poll", snap)
}
