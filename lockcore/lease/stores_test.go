package lease

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// storePairs are two Managers on different stores, for each way a program
// can have two: two databases of one server (the same schema), two schemas
// of one database, PostgreSQL and SQLite, two SQLite files.
func storePairs(t *testing.T) map[string]func(t *testing.T) (a, b *Manager) {
	pg := func(t *testing.T, p *pgxpool.Pool, schema string) *Manager {
		m, err := OpenPostgres(ctxT(t), p, testOptions(Options{Schema: schema}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	pool := func(t *testing.T, dsn string) *pgxpool.Pool {
		p, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	sq := func(t *testing.T, path string) *Manager {
		m, err := OpenSQLite(ctxT(t), path, testOptions(Options{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	return map[string]func(t *testing.T) (a, b *Manager){
		"two databases": func(t *testing.T) (a, b *Manager) {
			return pg(t, pool(t, pgtest.Database(t, "hk_stores_a")), "hk_same"),
				pg(t, pool(t, pgtest.Database(t, "hk_stores_b")), "hk_same")
		},
		"two schemas": func(t *testing.T) (a, b *Manager) {
			p := pgtest.Pool(t, nil)
			return pg(t, p, "hk_schema_a"), pg(t, p, "hk_schema_b")
		},
		"postgres and sqlite": func(t *testing.T) (a, b *Manager) {
			return pg(t, pgtest.Pool(t, nil), "hk_pg_sq"), sq(t, filepath.Join(t.TempDir(), "b.db"))
		},
		"two sqlite files": func(t *testing.T) (a, b *Manager) {
			return sq(t, filepath.Join(t.TempDir(), "a.db")), sq(t, filepath.Join(t.TempDir(), "b.db"))
		},
	}
}

// The same resource on two stores is two locks: holding it through one
// Manager, a context takes it through the other as any other lock (in
// either nesting, and a resource that sorts before it too: the global
// order is each store's), each Manager's FenceOf and LockOf answer its own
// grant, and the same store still refuses the held resource again.
func TestSameResourceTwoStoresIsTwoLocks(t *testing.T) {
	for name, pair := range storePairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := inOrder(pair(t))
			for range 3 { // a's fences of m1 move ahead of b's, so FenceOf can tell them apart
				release(t, acquire(t, ctxT(t), a, Map("m1"), Write))
			}
			nest(t, a, b, Map("m1"), Map("m1"))
			nest(t, a, b, Map("m1"), Map("m2"))
			nest(t, b, a, Map("m1"), Map("m2"))
			// The global order (level, id, then tables): refused at once,
			// as one set of tables refuses it.
			for _, n := range []struct {
				outer, inner *Manager
				r, q         Resource
			}{{b, a, Map("m1"), Map("m1")}, {a, b, Map("m2"), Map("m1")}, {a, b, Map("m1"), Project("p1")}} {
				l := acquire(t, ctxT(t), n.outer, n.r, Write)
				if li, err := n.inner.Acquire(l.Context(), n.q, Write); !errors.Is(err, ErrLockOrder) {
					t.Errorf("%s of %s under %s of %s: %v, %v; want ErrLockOrder", n.q, n.inner.st.where(), n.r, n.outer.st.where(), li, err)
				}
				release(t, l)
			}
		})
	}
}

// inOrder returns a and b in the order of their tables' names: the
// order in which the same resource is taken on both.
func inOrder(a, b *Manager) (*Manager, *Manager) {
	if a.st.where() > b.st.where() {
		return b, a
	}
	return a, b
}

// nest takes r through outer, then q through inner in the outer lock's
// context, and checks what each store answers about them.
func nest(t *testing.T, outer, inner *Manager, r, q Resource) {
	t.Helper()
	// A graph of its own: the order check's view of the nesting is
	// TestTwoStoresOrderedByTheFamilyGraph's.
	ctx := lockcore.WithOrder(ctxT(t), lockcore.NewOrderGraph())
	lo, err := outer.Acquire(ctx, r, Write)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, lo)
	li, err := inner.Acquire(lo.Context(), q, Write)
	if err != nil {
		t.Fatalf("%s through the second store while the first holds %s: %v", q, r, err)
	}
	defer release(t, li)
	in := li.Context()
	if r == q {
		if lo.Fence() == li.Fence() {
			t.Fatalf("the two stores' fences of %s coincide (%d): the test cannot tell them apart", r, lo.Fence())
		}
		if f, ok := FenceOf(in, r); ok {
			t.Errorf("FenceOf with %s held on two stores = %d, true; want false", r, f)
		}
		if l := LockOf(in, r); l != nil {
			t.Errorf("LockOf with %s held on two stores = the lock of fence %d; want nil", r, l.Fence())
		}
	}
	for _, s := range []struct {
		m *Manager
		r Resource
		l *Lock
	}{{outer, r, lo}, {inner, q, li}} {
		if f, ok := s.m.FenceOf(in, s.r); !ok || f != s.l.Fence() {
			t.Errorf("%s's Manager's FenceOf = %d, %v; want its own grant's %d", s.r, f, ok, s.l.Fence())
		}
		if l := s.m.LockOf(in, s.r); l != s.l {
			t.Errorf("%s's Manager's LockOf is not its own grant", s.r)
		}
		if _, err := s.m.TryAcquire(in, s.r, Read); !errors.Is(err, ErrLockOrder) {
			t.Errorf("%s again through the store that holds it: %v, want ErrLockOrder", s.r, err)
		}
	}
}

// Two stores' resources in the global order are no inversion for the
// family's order check either: its graph keeps each store's classes apart,
// so a map of one store then a map of the other records MAP to MAP across
// the stores, and the lease order refuses the reverse before the graph
// sees it.
func TestTwoStoresOrderedByTheFamilyGraph(t *testing.T) {
	for name, pair := range storePairs(t) {
		t.Run(name, func(t *testing.T) {
			a, b := inOrder(pair(t))
			g := lockcore.NewOrderGraph()
			g.SetStrict(true)
			ctx := lockcore.WithOrder(ctxT(t), g)
			nested := func(outer *Manager, r Resource, inner *Manager, q Resource) error {
				return outer.With(ctx, r, Write, func(ctx context.Context) error {
					return inner.With(ctx, q, Write, func(context.Context) error { return nil })
				})
			}
			if err := nested(a, Project("p1"), b, Map("m1")); err != nil {
				t.Errorf("a map of the second store under a project of the first: %v", err)
			}
			if err := nested(a, Map("m1"), b, Map("m1")); err != nil {
				t.Fatal(err)
			}
			if err := nested(b, Map("m1"), a, Map("m1")); !errors.Is(err, ErrLockOrder) {
				t.Errorf("the first store's map under the second's: %v, want ErrLockOrder", err)
			}
			if h := g.History(); len(h) != 0 {
				t.Errorf("inversions %+v, want none: the lease order refused the reverse first", h)
			}
		})
	}
}
