//go:build attack

package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// unprivilegedCluster starts a cluster of the test's own whose role
// "plain" may not read pg_control_system (as a hardened server's
// application role), and returns it.
func unprivilegedCluster(t *testing.T) *pgcluster.Cluster {
	c, err := pgcluster.Start(context.Background(), pgcluster.Options{})
	if err != nil {
		t.Fatalf("a cluster of the test's own: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	admin, err := pgx.Connect(ctxT(t), c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{
		"REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC",
		"CREATE ROLE plain LOGIN PASSWORD 'pw'",
		"GRANT CREATE ON DATABASE postgres TO plain",
	} {
		if _, err := admin.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// plainManager opens a Manager on c's database postgres as role plain.
func plainManager(t *testing.T, c *pgcluster.Cluster) *Manager {
	cfg, err := pgxpool.ParseConfig(c.DSNAs("plain", "pw", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	m, err := OpenPostgres(ctxT(t), p, testOptions(Options{Schema: "bp14_restart"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestAttackOrderAcrossARestartWithoutSystemIdentifier: the global order
// takes the same resource on two sets of tables "in the order of their
// names (stable across processes)". For a role that may not read
// pg_control_system a database's name holds the server's start time, so a
// process that opened its Managers before one server restarted and a
// process that opened them after can order the same two stores opposite
// ways: each nests map:m1 of both by its own order, and they deadlock
// (both wait until their waits run out, which neither's order check can
// see). Clusters X, then Y, started in that order, then X restarted:
// before, X's name sorts first; after, Y's.
func TestAttackOrderAcrossARestartWithoutSystemIdentifier(t *testing.T) {
	x, y := unprivilegedCluster(t), unprivilegedCluster(t)
	before := [2]*Manager{plainManager(t, x), plainManager(t, y)}
	if err := x.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := [2]*Manager{plainManager(t, x), plainManager(t, y)}
	t.Logf("before the restart: X %s, Y %s; after: X %s, Y %s",
		before[0].st.where(), before[1].st.where(), after[0].st.where(), after[1].st.where())
	// Each process nests in the order its own check allows.
	nestOrder := func(m [2]*Manager) (first, second *Manager) {
		if m[0].st.where() < m[1].st.where() {
			return m[0], m[1]
		}
		return m[1], m[0]
	}
	// Each holds its first before asking for its second, unless the other
	// cannot get its own first: the two orders agree, and it waits behind
	// this one's (then 5s go by).
	held := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	errs := make([]error, 2)
	var done sync.WaitGroup
	for i, proc := range [][2]*Manager{before, after} {
		done.Go(func() {
			first, second := nestOrder(proc)
			ctx := lockcore.WithOrder(ctxT(t), lockcore.NewOrderGraph()) // a process of its own
			lo, err := first.Acquire(ctx, Map("m1"), Write, lockcore.Wait(30*time.Second))
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = lo.Release(context.Background()) }()
			close(held[i])
			select {
			case <-held[1-i]:
			case <-time.After(5 * time.Second):
			}
			li, err := second.Acquire(lo.Context(), Map("m1"), Write, lockcore.Wait(3*time.Second))
			if err == nil {
				_ = li.Release(context.Background())
			}
			errs[i] = err
		})
	}
	done.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v (a deadlock across the stores if it timed out)", i, err)
		}
	}
}

// TestAttackTablesWithoutStoreIDCompleted: tables made before dal_store
// existed (the tables' name) are completed when a Manager opens them, and
// keep their locks: a grant made before is still held, and the next grant's
// fence is higher. Two Managers opened after are one store.
func TestAttackTablesWithoutStoreIDCompleted(t *testing.T) {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 8 })
	opts := testOptions(Options{Schema: "bp14_old"})
	if _, err := pool.Exec(ctxT(t), "DROP SCHEMA IF EXISTS bp14_old CASCADE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS bp14_old CASCADE") })
	old, err := OpenPostgres(ctxT(t), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	l := acquire(t, ctxT(t), old, Map("m1"), Write)
	if _, err := pool.Exec(ctxT(t), "DROP TABLE bp14_old.dal_store"); err != nil { // as made before it
		t.Fatal(err)
	}
	a, err := OpenPostgres(ctxT(t), pool, opts)
	if err != nil {
		t.Fatalf("opening tables made before dal_store: %v", err)
	}
	defer a.Close()
	b, err := OpenPostgres(ctxT(t), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.st.where() != b.st.where() {
		t.Errorf("one schema named %q and %q", a.st.where(), b.st.where())
	}
	if got, err := a.TryAcquire(ctxT(t), Map("m1"), Write); err == nil {
		release(t, got)
		t.Fatal("map:m1 granted again after the tables were completed")
	}
	release(t, l)
	got := acquire(t, ctxT(t), a, Map("m1"), Write)
	defer release(t, got)
	if got.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d", got.Fence(), l.Fence())
	}
}

// TestAttackClonedDatabaseIsOtherTables: a database made with CREATE
// DATABASE ... TEMPLATE copies the tables' id (dal_store) with them, and
// its tables are other tables: the same resource on the original and the
// clone is two locks, nested one way granted (and the reverse refused),
// each Manager's FenceOf its own grant's.
func TestAttackClonedDatabaseIsOtherTables(t *testing.T) {
	dsn := pgtest.Database(t, "bp14_original")
	open := func(dsn string) (*Manager, *pgxpool.Pool) {
		p, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		m, err := OpenPostgres(ctxT(t), p, testOptions(Options{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m, p
	}
	first, pool := open(dsn)
	_ = first.Close()
	pool.Close() // a template has no sessions
	cloneDSN := pgtest.Database(t, "bp14_clone")
	admin, err := pgx.Connect(ctxT(t), pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for _, q := range []string{"DROP DATABASE bp14_clone", "CREATE DATABASE bp14_clone TEMPLATE bp14_original"} {
		if _, err := admin.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	orig, _ := open(dsn)
	clone, _ := open(cloneDSN)
	if orig.st.where() == clone.st.where() {
		t.Fatalf("the original and its clone named alike: %q", orig.st.where())
	}
	outer, inner := orig, clone
	if inner.st.where() < outer.st.where() {
		outer, inner = inner, outer
	}
	lo := acquire(t, ctxT(t), outer, Map("m1"), Write)
	defer release(t, lo)
	li, err := inner.Acquire(lo.Context(), Map("m1"), Write, lockcore.Wait(3*time.Second))
	if err != nil {
		t.Fatalf("map:m1 in the clone while the original's is held: %v", err)
	}
	defer release(t, li)
	if f, ok := outer.FenceOf(li.Context(), Map("m1")); !ok || f != lo.Fence() {
		t.Errorf("the outer Manager's FenceOf = %d, %v; want its own %d", f, ok, lo.Fence())
	}
	if f, ok := inner.FenceOf(li.Context(), Map("m1")); !ok || f != li.Fence() {
		t.Errorf("the inner Manager's FenceOf = %d, %v; want its own %d", f, ok, li.Fence())
	}
}

// TestAttackTablesMadeAtOnceNamedAlike: Managers of several processes
// opening one fresh schema at once (their creations collide, the losers
// try again) all read one id: one store.
func TestAttackTablesMadeAtOnceNamedAlike(t *testing.T) {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 8 })
	drop := func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS bp14_atonce CASCADE") }
	drop()
	t.Cleanup(drop)
	names := make([]string, 4)
	var done sync.WaitGroup
	for i := range names {
		done.Go(func() {
			m, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Schema: "bp14_atonce"}))
			if err != nil {
				t.Errorf("Manager %d: %v", i, err)
				return
			}
			names[i] = m.st.where()
			_ = m.Close()
		})
	}
	done.Wait()
	for i, n := range names {
		if n != names[0] {
			t.Errorf("Manager %d named the schema %q, Manager 0 %q", i, n, names[0])
		}
	}
}
