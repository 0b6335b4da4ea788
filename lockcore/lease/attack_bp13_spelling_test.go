//go:build attack

package lease

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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
