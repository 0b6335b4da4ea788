package pgsource_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// nextID hands every test its own agent ids.
var nextID atomic.Int32

func freshAgent() lockcore.Key { return lockcore.Pair(registry.SpaceAgent, 7000+nextID.Add(1)) }

// table returns base made unique in the test binary's database, which every
// test shares: a -count=N rerun does not meet the tables of the runs before.
func table(base string) string { return base + "_" + strconv.Itoa(int(nextID.Add(1))) }

// locks returns a lock Service on a pool of its own.
func locks(t *testing.T, maxConns int32) *lockcore.Service {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = maxConns })
	return lockcore.New(pool)
}

// queued counts the rows of key in the test database.
func queued(t *testing.T, mon *pgx.Conn, db string, key lockcore.Key) int {
	t.Helper()
	snap, err := pgsource.Inspect(context.Background(), mon)
	if err != nil {
		t.Fatal(err)
	}
	return len(rowsOfKey(snap, db, key))
}

// rowsOfKey filters a snapshot to the rows of one key in the test database.
func rowsOfKey(snap model.Snapshot, db string, key lockcore.Key) []model.Lock {
	var out []model.Lock
	for _, l := range snap.Locks {
		if l.Database == db && l.Pair == key.IsPair() && l.Namespace == key.Namespace() && l.EntityID == key.EntityID() {
			out = append(out, l)
		}
	}
	return out
}

func currentDB(t *testing.T, c *pgx.Conn) string {
	var db string
	if err := c.QueryRow(context.Background(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	return db
}

// waitOn starts an exclusive wait for key on a new connection and returns
// once the server shows it queued.
func waitOn(t *testing.T, mon *pgx.Conn, key lockcore.Key, fn string) (pid int32) {
	t.Helper()
	c := pgtest.Conn(t)
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	db := currentDB(t, mon)
	before := queued(t, mon, db, key)
	// The wait ends when the holder lets go or when cleanup cancels it;
	// cleanup waits for it before c is closed (cleanups run last-in first).
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Exec(ctx, "SELECT "+fn+"($1::int4, $2::int4)", key.Space(), key.ID())
	}()
	t.Cleanup(func() { cancel(); <-done })
	pgtest.Eventually(t, "the waiter is queued", func() bool { return queued(t, mon, db, key) == before+1 })
	return pid
}

func TestInspectQueue(t *testing.T) {
	s := locks(t, 2)
	mon := pgtest.Conn(t)
	db := currentDB(t, mon)
	key := freshAgent()
	l, err := s.Acquire(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var waiters []int32
	for range 3 {
		waiters = append(waiters, waitOn(t, mon, key, "pg_advisory_lock"))
	}
	snap, err := pgsource.Inspect(context.Background(), mon)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if snap.Taken.IsZero() || snap.Connections < 5 {
		t.Errorf("Taken=%v Connections=%d", snap.Taken, snap.Connections)
	}
	rows := rowsOfKey(snap, db, key)
	if len(rows) != 4 {
		t.Fatalf("rows for %v: %+v", key, rows)
	}
	h := rows[0]
	if h.Session().ApplicationName != lockcore.DefaultApplicationName || h.Owner != l.Owner() {
		t.Errorf("holder's application %q (owner %q): want %s, the owner id %q apart", h.Session().ApplicationName, h.Owner, lockcore.DefaultApplicationName, l.Owner())
	}
	if !h.Granted || uint32(h.PID) != l.PID() || h.Namespace != "AGENT" || h.EntityID != int64(key.ID()) ||
		h.Mode != model.ModeExclusive || h.QueuePos != 0 ||
		h.Kind != model.KindAdvisory || h.KeyLabel() != key.String() {
		t.Errorf("holder row %+v", h)
	}
	for i, w := range rows[1:] {
		if w.Granted || w.PID != waiters[i] || w.QueuePos != i+1 || !slices.Equal(w.BlockedBy, []int32{h.PID}) ||
			w.WaitStart.IsZero() || w.Waited(snap.Taken) < 0 || w.Database != db {
			t.Errorf("waiter %d row %+v; want pid %d, queue %d, blocked by [%d] only", i+1, w, waiters[i], i+1, h.PID)
		}
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestInspectDecodesKeys(t *testing.T) {
	mon := pgtest.Conn(t)
	db := currentDB(t, mon)
	s := locks(t, 5)
	keys := []lockcore.Key{
		lockcore.Pair(-77, -3), lockcore.Int64(42424242), lockcore.HashKey("tenant-1:2025-01-15"),
		lockcore.Int64(-5_000_000_000), lockcore.Pair(registry.SpaceAgent, -9),
	}
	want := map[lockcore.Key][2]any{
		keys[0]: {"-77", int64(-3)}, keys[1]: {"IDEMPOTENCY_CLEANUP", int64(42424242)},
		keys[2]: {"", int64(761239885)}, keys[3]: {"", int64(-5_000_000_000)}, keys[4]: {"AGENT", int64(-9)},
	}
	var held []*lockcore.Lock
	for _, k := range keys {
		l, err := s.Acquire(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	snap, err := pgsource.Inspect(context.Background(), mon)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		rows := rowsOfKey(snap, db, k)
		if len(rows) != 1 || rows[0].Namespace != want[k][0] || rows[0].EntityID != want[k][1] || rows[0].Pair != k.IsPair() {
			t.Errorf("%v decoded as %+v, want namespace %q id %d", k, rows, want[k][0], want[k][1])
		}
	}
	for _, l := range held {
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Share holders, an exclusive waiter blocked by both, then a share waiter
// queued behind the exclusive waiter.
func TestInspectShareModes(t *testing.T) {
	mon := pgtest.Conn(t)
	db := currentDB(t, mon)
	key := freshAgent()
	var holders []int32
	for range 2 {
		c := pgtest.Conn(t)
		var pid int32
		if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock_shared($1::int4, $2::int4)) x", key.Space(), key.ID()).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		holders = append(holders, pid)
	}
	ex := waitOn(t, mon, key, "pg_advisory_lock")
	sh := waitOn(t, mon, key, "pg_advisory_lock_shared")
	snap, err := pgsource.Inspect(context.Background(), mon)
	if err != nil {
		t.Fatal(err)
	}
	rows := rowsOfKey(snap, db, key)
	if len(rows) != 4 {
		t.Fatalf("rows %+v", rows)
	}
	slices.Sort(holders)
	if got := []int32{rows[0].PID, rows[1].PID}; !slices.Equal(got, holders) || rows[0].Mode != model.ModeShare {
		t.Errorf("holders %v (%s), want %v share", got, rows[0].Mode, holders)
	}
	if rows[2].PID != ex || !slices.Equal(rows[2].BlockedBy, holders) || rows[2].QueuePos != 1 {
		t.Errorf("exclusive waiter %+v, want blocked by %v", rows[2], holders)
	}
	if rows[3].PID != sh || !slices.Equal(rows[3].BlockedBy, []int32{ex}) || rows[3].QueuePos != 2 {
		t.Errorf("share waiter %+v, want blocked by the exclusive waiter %d", rows[3], ex)
	}
}

// Arrange on rows from two databases: the same key in two databases is two
// locks, and does not block across.
func TestArrangeSeparatesDatabases(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	rows := []model.Lock{
		{PID: 30, Database: "b", Pair: true, Namespace: "AGENT", EntityID: 1, Mode: model.ModeExclusive, WaitStart: t0},
		{PID: 10, Database: "a", Pair: true, Namespace: "AGENT", EntityID: 1, Mode: model.ModeExclusive, Granted: true},
		{PID: 21, Database: "a", Pair: true, Namespace: "AGENT", EntityID: 1, Mode: model.ModeExclusive, WaitStart: t0.Add(time.Second)},
		{PID: 20, Database: "a", Pair: true, Namespace: "AGENT", EntityID: 1, Mode: model.ModeExclusive, WaitStart: t0},
	}
	pgsource.Arrange(rows)
	var got []int32
	for _, r := range rows {
		got = append(got, r.PID)
	}
	if !slices.Equal(got, []int32{10, 20, 21, 30}) {
		t.Fatalf("order %v", got)
	}
	if rows[1].QueuePos != 1 || rows[2].QueuePos != 2 || !slices.Equal(rows[2].BlockedBy, []int32{10}) {
		t.Errorf("queue in a: %+v %+v", rows[1], rows[2])
	}
	if rows[3].QueuePos != 1 || len(rows[3].BlockedBy) != 0 {
		t.Errorf("waiter in b blocked across databases: %+v", rows[3])
	}
}
