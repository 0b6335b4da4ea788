package pgsource_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// database creates a database of its own for t (pgtest.Database) with a
// table table ("schema.name") of 3 rows, and returns its name and a
// superuser DSN on it.
func database(t *testing.T, tag, table string) (name, dsn string) {
	t.Helper()
	name = fmt.Sprintf("lt_%s_%d", tag, os.Getpid())
	dsn = pgtest.Database(t, name)
	c := dbConn(t, dsn)
	schema, _, _ := strings.Cut(table, ".")
	if _, err := c.Exec(context.Background(), "CREATE SCHEMA IF NOT EXISTS "+schema+"; CREATE TABLE "+table+" (id int PRIMARY KEY, v int); INSERT INTO "+table+" SELECT g, 0 FROM generate_series(1, 3) g"); err != nil {
		t.Fatal(err)
	}
	return name, dsn
}

// dbConn is a connection to dsn, closed when t ends.
func dbConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// pileUp makes, in the database of dsn, a row-lock queue on table's first
// row (a holder in an open transaction, a waiter) and the DDL pile-up
// behind it (an ALTER TABLE queued behind the holder). It returns the
// holder's pid and the ALTER's.
func pileUp(t *testing.T, dsn, table string) (holder, alter int32) {
	t.Helper()
	ctx := context.Background()
	h := dbConn(t, dsn)
	if err := h.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&holder); err != nil {
		t.Fatal(err)
	}
	tx, err := h.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "SELECT * FROM "+table+" WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	wait := func(sql string) int32 {
		c := dbConn(t, dsn)
		var pid int32
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = c.Exec(wctx, sql)
		}()
		t.Cleanup(func() { cancel(); <-done })
		pgtest.Eventually(t, "pid "+fmt.Sprint(pid)+" waits", func() bool {
			var waiting bool
			err := h.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)", pid).Scan(&waiting)
			return err == nil && waiting
		})
		return pid
	}
	wait("SELECT * FROM " + table + " WHERE id = 1 FOR UPDATE")
	alter = wait("ALTER TABLE " + table + " ADD COLUMN x int")
	return holder, alter
}

// monitorSessions counts the monitor's sessions in database db.
func monitorSessions(t *testing.T, db string) int {
	t.Helper()
	var n int
	c := pgtest.Conn(t)
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
		db, pgsource.ApplicationName).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pollUntil polls m until cond holds for a snapshot, and returns it.
func pollUntil(t *testing.T, m *pgsource.Monitor, what string, cond func(model.Snapshot) bool) model.Snapshot {
	t.Helper()
	var snap model.Snapshot
	defer func() {
		if t.Failed() {
			for _, l := range snap.Locks {
				t.Logf("last poll: %s %s pid %d granted %v", l.Database, l.KeyLabel(), l.PID, l.Granted)
			}
			t.Logf("last poll: partial %q", snap.Partial)
		}
	}()
	pgtest.Eventually(t, what, func() bool {
		var err error
		if snap, err = m.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
		return cond(snap)
	})
	return snap
}

// labels lists the key labels of a database's row and relation locks, once each.
func labels(snap model.Snapshot, db string) []string {
	var out []string
	for _, l := range snap.Locks {
		if l.Database == db && (l.Kind == model.KindRow || l.Kind == model.KindRelation) && !slices.Contains(out, l.KeyLabel()) {
			out = append(out, l.KeyLabel())
		}
	}
	slices.Sort(out)
	return out
}

// Issue 30: a monitor connected to one database named the relations of
// every other database "relation ?". With three databases, pile-ups in
// two, and a pg_monitor role, every relation is named as schema.table in
// its own database; the monitor opens connections only where it sees
// locks, and within its bound (Options.ConnBound); with CONNECT revoked, a database's relations read "DB oid N" and
// the snapshot says why.
func TestPollNamesRelationsOfEveryDatabase(t *testing.T) {
	dbA, dsnA := database(t, "a", "public.orders")
	dbB, dsnB := database(t, "b", "billing.invoices")
	dbC, _ := database(t, "c", "public.idle")
	pileUp(t, dsnA, "public.orders")
	pileUp(t, dsnB, "billing.invoices")
	role := pgtest.Role(t, "lt_names_monitor", "pw", "pg_monitor")

	wantA := []string{"public.orders", "public.orders row (0,1)"}
	wantB := []string{"billing.invoices", "billing.invoices row (0,1)"}
	m := connect(t, role)
	snap := pollUntil(t, m, "the relations of both databases are named", func(s model.Snapshot) bool {
		return slices.Equal(labels(s, dbA), wantA) && slices.Equal(labels(s, dbB), wantB)
	})
	if len(snap.Partial) != 0 {
		t.Errorf("Partial = %q, want none", snap.Partial)
	}
	for _, l := range snap.Locks {
		if l.Kind.PG() && l.Kind != model.KindAdvisory && l.Kind != model.KindTransaction && l.Relation == "" {
			t.Errorf("pid %d in %s: %s not named", l.PID, l.Database, l.KeyLabel())
		}
	}
	if a, b, c := monitorSessions(t, dbA), monitorSessions(t, dbB), monitorSessions(t, dbC); a != 1 || b != 1 || c != 0 {
		t.Errorf("monitor sessions: %s %d, %s %d, %s %d; want 1, 1 and none in the database without locks", dbA, a, dbB, b, dbC, c)
	}

	// Bounded to two connections, one its pool's: one database named, the
	// other's relations unnamed, and the snapshot says why.
	m3, err := pgsource.Connect(context.Background(), role, pgsource.Options{MaxConns: 1, ConnBound: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m3.Close)
	snap = pollUntil(t, m3, "one database named, the bound said", func(s model.Snapshot) bool {
		return (slices.Equal(labels(s, dbA), wantA) || slices.Equal(labels(s, dbB), wantB)) && len(s.Partial) > 0
	})
	if slices.Equal(labels(snap, dbA), wantA) == slices.Equal(labels(snap, dbB), wantB) ||
		len(snap.Partial) != 1 || !strings.Contains(snap.Partial[0], "bound of connections to this server is reached (2)") {
		t.Errorf("bounded to 2: %s %q, %s %q, Partial %q; want one named and the other's bound said", dbA, labels(snap, dbA), dbB, labels(snap, dbB), snap.Partial)
	}

	// CONNECT revoked: a fresh monitor cannot enter dbB.
	admin := dbConn(t, pgtest.AdminDSN(t))
	if _, err := admin.Exec(context.Background(), "REVOKE CONNECT ON DATABASE "+pgx.Identifier{dbB}.Sanitize()+" FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	m2 := connect(t, role)
	var log bytes.Buffer // written by the namer's goroutines, read once they are done
	m2.SetLog(slog.New(slog.NewTextHandler(&log, nil)))
	snap = pollUntil(t, m2, "dbA named and dbB's failure said", func(s model.Snapshot) bool {
		return slices.Equal(labels(s, dbA), wantA) && len(s.Partial) > 0
	})
	for range 3 { // the failure stands: said in every poll, logged once
		if snap, _ = m2.Poll(context.Background()); len(snap.Partial) != 1 {
			t.Fatalf("Partial = %q", snap.Partial)
		}
	}
	if _, err := m2.Named(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), "cannot name relations"); n != 1 {
		t.Errorf("the failure logged %d times, want once:\n%s", n, log.String())
	}
	if got := labels(snap, dbB); len(got) != 2 || !strings.HasPrefix(got[0], dbB+" oid ") || !strings.HasSuffix(got[1], " row (0,1)") {
		t.Errorf("dbB's labels with CONNECT revoked: %q, want %q and the same with row (0,1)", got, dbB+" oid N")
	}
	if len(snap.Partial) != 1 || !strings.Contains(snap.Partial[0], dbB) || !strings.Contains(snap.Partial[0], "permission denied") {
		t.Errorf("Partial = %q, want one line naming %s and why", snap.Partial, dbB)
	}
}

// The connections that name relations close once idle, and an unknown
// relation is looked up once: polls after the names are known open none.
func TestNamesConnectionClosesWhenIdle(t *testing.T) {
	db, dsn := database(t, "idle", "public.orders")
	pileUp(t, dsn, "public.orders")
	m, err := pgsource.Connect(context.Background(), pgtest.DSN(t), pgsource.Options{NamesIdle: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	pollUntil(t, m, "named", func(s model.Snapshot) bool {
		return slices.Equal(labels(s, db), []string{"public.orders", "public.orders row (0,1)"})
	})
	pgtest.Eventually(t, "the idle naming connection closes", func() bool { return monitorSessions(t, db) == 0 })
	for range 3 {
		snap, err := m.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := labels(snap, db); !slices.Equal(got, []string{"public.orders", "public.orders row (0,1)"}) {
			t.Fatalf("labels from the cache: %q", got)
		}
	}
	if n := monitorSessions(t, db); n != 0 {
		t.Errorf("%d monitor sessions in %s after polls with every name cached, want 0", n, db)
	}
}

// Databases made from one template share its relations' oids: a relation
// of another database is named there, never by the monitor's own relation
// of the same oid.
func TestPollNamesSameOidInTwoDatabases(t *testing.T) {
	tpl, _ := database(t, "tpl", "public.orders")
	// A template must have no sessions while it is copied.
	c := pgtest.Conn(t)
	if _, err := c.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", tpl); err != nil {
		t.Fatal(err)
	}
	admin := dbConn(t, pgtest.AdminDSN(t))
	var own, other string
	for _, tag := range []string{"own", "other"} {
		name := fmt.Sprintf("lt_%s_%d", tag, os.Getpid())
		ident := pgx.Identifier{name}.Sanitize()
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
		if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+ident+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if c, err := pgx.Connect(context.Background(), pgtest.AdminDSN(t)); err == nil {
				_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
				c.Close(context.Background())
			}
		})
		if tag == "own" {
			own = name
		} else {
			other = name
		}
	}
	ownDSN, _ := pgtest.WithDatabase(pgtest.AdminDSN(t), own)
	otherDSN, _ := pgtest.WithDatabase(pgtest.AdminDSN(t), other)
	if _, err := dbConn(t, ownDSN).Exec(context.Background(), "ALTER TABLE public.orders RENAME TO own_orders"); err != nil {
		t.Fatal(err)
	}
	pileUp(t, ownDSN, "public.own_orders")
	pileUp(t, otherDSN, "public.orders")
	m := connect(t, ownDSN)
	pollUntil(t, m, "each database's relation named as it is named there", func(s model.Snapshot) bool {
		return slices.Equal(labels(s, own), []string{"public.own_orders", "public.own_orders row (0,1)"}) &&
			slices.Equal(labels(s, other), []string{"public.orders", "public.orders row (0,1)"})
	})
}

// A relation of another database renamed while the monitor runs shows its
// new name once its name has stood for namesRetry (bp11: the cache was
// never emptied, and a queue on the renamed table was labelled with the
// old name for as long as the monitor ran).
func TestPollNamesARenamedRelation(t *testing.T) {
	pgsource.SetNamesRetry(t, 300*time.Millisecond)
	db, dsn := database(t, "ren", "public.before")
	m := connect(t, pgtest.DSN(t))
	mon := pgtest.Conn(t)
	ctx := context.Background()
	// queue makes a holder and a waiter on table, polls until want names
	// the waiter's row, and ends both.
	queue := func(table, want string) {
		t.Helper()
		holder, waiter := dbConn(t, dsn), dbConn(t, dsn)
		if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		blockedOn(t, mon, waiter, "BEGIN; LOCK TABLE "+table+" IN ACCESS SHARE MODE; COMMIT")
		pollUntil(t, m, "the queue on "+table+" labelled "+want, func(s model.Snapshot) bool {
			return slices.Equal(labels(s, db), []string{want})
		})
		if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
	}
	queue("public.before", "public.before")
	if _, err := dbConn(t, dsn).Exec(ctx, "ALTER TABLE public.before RENAME TO after"); err != nil {
		t.Fatal(err)
	}
	queue("public.after", "public.after")
}
