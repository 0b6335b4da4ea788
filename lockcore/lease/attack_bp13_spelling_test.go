//go:build attack

package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// TestAttackSQLiteOneFileSpelledTwice: a lock is a resource in one set of
// tables, and one SQLite file reached by two paths (a symlink, a relative
// path through "..") is one set of tables. (A hard link is not: SQLite
// names its WAL by the path, and fails to open the second.) A context that
// holds a resource through one Manager and asks for it again through a
// Manager on the other path is refused at once (ErrLockOrder, as on main),
// rather than waiting for its own hold until its wait runs out.
func TestAttackSQLiteOneFileSpelledTwice(t *testing.T) {
	spellings := map[string]func(t *testing.T, dir, file string) string{
		"symlink": func(t *testing.T, dir, file string) string {
			p := filepath.Join(dir, "link.db")
			if err := os.Symlink(file, p); err != nil {
				t.Fatal(err)
			}
			return p
		},
		"symlinked directory": func(t *testing.T, dir, file string) string {
			p := filepath.Join(dir, "linkdir")
			if err := os.Symlink(filepath.Dir(file), p); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(p, filepath.Base(file))
		},
		"relative with dot-dot": func(t *testing.T, dir, file string) string {
			wd, err := os.Getwd()
			if err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(wd, file)
			if err != nil {
				t.Fatal(err)
			}
			return rel
		},
	}
	for name, spell := range spellings {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			real := filepath.Join(dir, "real")
			if err := os.Mkdir(real, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(real, "a.db")
			open := func(path string) *Manager {
				m, err := OpenSQLite(ctxT(t), path, testOptions(Options{}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = m.Close() })
				return m
			}
			a := open(file)
			b := open(spell(t, dir, file))
			l := acquire(t, ctxT(t), a, Map("m1"), Write)
			defer release(t, l)
			start := time.Now()
			got, err := b.Acquire(l.Context(), Map("m1"), Write, lockcore.Wait(3*time.Second))
			if got != nil {
				release(t, got)
				t.Fatalf("the resource granted again through another spelling of its file while the context holds it (fences %d, %d)", l.Fence(), got.Fence())
			}
			if !errors.Is(err, ErrLockOrder) {
				t.Errorf("the held resource through another spelling of its file: %v after %v, want ErrLockOrder at once", err, time.Since(start).Round(time.Millisecond))
			}
			if f, ok := b.FenceOf(l.Context(), Map("m1")); !ok || f != l.Fence() {
				t.Errorf("the other spelling's Manager's FenceOf = %d, %v; want the hold's %d", f, ok, l.Fence())
			}
		})
	}
}

// pgSpelledTwice returns two Managers on one database and schema, through
// pools whose DSNs spell the server differently (the socket directory with
// a trailing slash), as role (nil: the DSN's own).
func pgSpelledTwice(t *testing.T, dsn string) (a, b *Manager) {
	open := func(spell func(*pgxpool.Config)) *Manager {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		spell(cfg)
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		m, err := OpenPostgres(ctxT(t), p, testOptions(Options{Schema: "bp13_spelled"}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	return open(func(*pgxpool.Config) {}), open(func(c *pgxpool.Config) {
		if strings.HasPrefix(c.ConnConfig.Host, "/") {
			c.ConnConfig.Host += "/"
		} else {
			c.ConnConfig.Host = "localhost"
		}
	})
}

// nestSpelled holds map:m1 through a and asks for it again through b, in
// the hold's context: one lock, so refused at once (ErrLockOrder, as on
// main), not waited for until the wait runs out.
func nestSpelled(t *testing.T, a, b *Manager) {
	l := acquire(t, ctxT(t), a, Map("m1"), Write)
	defer release(t, l)
	start := time.Now()
	got, err := b.Acquire(l.Context(), Map("m1"), Write, lockcore.Wait(3*time.Second))
	if got != nil {
		release(t, got)
	}
	if !errors.Is(err, ErrLockOrder) {
		t.Errorf("the held resource through another spelling of its database: %v after %v, want ErrLockOrder at once", err, time.Since(start).Round(time.Millisecond))
	}
}

// TestAttackPostgresOneDatabaseSpelledTwice: a lease store is its
// database as the server names it and its schema, so two pools that spell
// one database differently are one set of tables.
func TestAttackPostgresOneDatabaseSpelledTwice(t *testing.T) {
	a, b := pgSpelledTwice(t, pgtest.DSN(t))
	nestSpelled(t, a, b)
}

// TestAttackPostgresSpelledTwiceWithoutSystemIdentifier: the same, for a
// role that may not read pg_control_system: pgident named the cluster by
// the connection's host and port, so the two spellings were two stores and
// the nested acquire waited for its own hold (on main, refused by name).
func TestAttackPostgresSpelledTwiceWithoutSystemIdentifier(t *testing.T) {
	dsn := pgtest.Database(t, "bp13_nosysid")
	admin, err := pgx.Connect(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	role := fmt.Sprintf("bp13_nosysid_%d", time.Now().UnixNano()%1e9)
	for _, q := range []string{
		"REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC",
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw'", role),
		fmt.Sprintf("GRANT CREATE ON DATABASE bp13_nosysid TO %s", role),
	} {
		if _, err := admin.Exec(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS bp13_spelled CASCADE")
			_, _ = c.Exec(ctx, "REVOKE ALL ON DATABASE bp13_nosysid FROM "+role)
			c.Close(ctx)
		}
		if c, err := pgx.Connect(ctx, pgtest.AdminDSN(t)); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS bp13_nosysid WITH (FORCE)")
			_, _ = c.Exec(ctx, "DROP ROLE IF EXISTS "+role)
			c.Close(ctx)
		}
	})
	roleDSN, err := pgtest.WithUser(dsn, role, "pw")
	if err != nil {
		t.Fatal(err)
	}
	a, b := pgSpelledTwice(t, roleDSN)
	nestSpelled(t, a, b)
}

// TestAttackFenceOfAfterTheOtherStoresRelease: the package's FenceOf
// reports nothing only when the context holds the resource in two sets of
// tables. A context (detached from the cancellation: WithoutCancel) that
// carries a released lock of map:m1 in one SQLite file and holds map:m1 in
// another holds it in one: FenceOf is that hold's fence, as on main.
func TestAttackFenceOfAfterTheOtherStoresRelease(t *testing.T) {
	open := func() *Manager {
		m, err := OpenSQLite(ctxT(t), filepath.Join(t.TempDir(), "a.db"), testOptions(Options{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return m
	}
	a, b := open(), open()
	ctx := lockcore.WithOrder(ctxT(t), lockcore.NewOrderGraph())
	la := acquire(t, ctx, a, Map("m1"), Write)
	release(t, la)
	detached := context.WithoutCancel(la.Context())
	lb := acquire(t, detached, b, Map("m1"), Write)
	defer release(t, lb)
	if f, ok := FenceOf(lb.Context(), Map("m1")); !ok || f != lb.Fence() {
		t.Errorf("FenceOf with map:m1 released in one file and held in the other = %d, %v; want the hold's %d", f, ok, lb.Fence())
	}
}
