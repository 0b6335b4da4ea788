package lease

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fillVersion writes two files, one in a subdirectory, both holding v.
func fillVersion(v string) func(string) error {
	return func(tmp string) error {
		if err := os.WriteFile(filepath.Join(tmp, "a.txt"), []byte(v), 0o644); err != nil {
			return err
		}
		if err := os.Mkdir(filepath.Join(tmp, "sub"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, "sub", "b.txt"), []byte(v), 0o644)
	}
}

// visible returns the version a reader following the manifest sees, and
// fails the test if what it sees is incomplete or mixed.
func visible(t *testing.T, m *Manager, r Resource, name string) string {
	t.Helper()
	e, ok, err := m.Manifest(ctxT(t), r, name)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	a, errA := os.ReadFile(filepath.Join(e.Path, "a.txt"))
	b, errB := os.ReadFile(filepath.Join(e.Path, "sub", "b.txt"))
	if errA != nil || errB != nil || string(a) != string(b) {
		t.Fatalf("half-visible result at %s: a=%q (%v) b=%q (%v)", e.Path, a, errA, b, errB)
	}
	return string(a)
}

func testAtomicWriteInterrupted(t *testing.T, e *env) {
	m := e.open(Options{})
	dir := filepath.Join(t.TempDir(), "map-m1")
	r := Map("m1")
	write := func(v, crashAt string) error {
		l := acquire(t, ctxT(t), m, r, Write)
		defer release(t, l)
		w := AtomicWrite{Dir: dir, Name: "tiles", Fill: fillVersion(v)}
		if crashAt != "" {
			w.afterStep = func(s string) error {
				if s == crashAt {
					return errors.New("crash after " + s)
				}
				return nil
			}
		}
		entry, err := l.WriteAtomic(ctxT(t), w)
		if err == nil && (entry.Fence != l.Fence() || entry.State != "committed") {
			t.Errorf("entry %+v for fence %d", entry, l.Fence())
		}
		return err
	}
	if got := visible(t, m, r, "tiles"); got != "" {
		t.Fatalf("visible before any write: %q", got)
	}
	if err := write("v0", ""); err != nil {
		t.Fatal(err)
	}
	want := "v0"
	for _, step := range atomicSteps {
		v := "after " + step
		if err := write(v, step); err == nil {
			t.Fatalf("crash at %q: no error", step)
		}
		if step == stepCommit { // the commit happened: the new version is the one
			want = v
		}
		if got := visible(t, m, r, "tiles"); got != want {
			t.Errorf("crash after %q: visible %q, want %q", step, got, want)
		}
	}
	if err := write("final", ""); err != nil {
		t.Fatal(err)
	}
	if got := visible(t, m, r, "tiles"); got != "final" {
		t.Errorf("visible %q after the last write", got)
	}
	// The last write swept what the crashes left: one version, an empty tmp.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, d := range entries {
		names = append(names, d.Name())
	}
	cur, _, _ := m.Manifest(ctxT(t), r, "tiles")
	if want := []string{filepath.Base(cur.Path), "tmp"}; !slices.Equal(names, want) {
		t.Errorf("left in %s: %v, want %v", dir, names, want)
	}
	if tmps, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(tmps) != 0 {
		t.Errorf("tmp not swept: %v", tmps)
	}
	// Only under a write lock.
	l := acquire(t, ctxT(t), m, r, Read)
	if _, err := l.WriteAtomic(ctxT(t), AtomicWrite{Dir: dir, Name: "tiles", Fill: fillVersion("x")}); !errors.Is(err, ErrNotWriteLocked) {
		t.Errorf("WriteAtomic under a read lock: %v", err)
	}
	release(t, l)
}

// A holder that lost its lock without noticing yet cannot commit: the
// manifest's transaction checks the grant (the storage-side fence check).
func testAtomicWriteFenced(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A", Heartbeat: -1})
	dir := t.TempDir()
	r := Sketch("s1")
	l := acquire(t, ctxT(t), a, r, Write)
	e.exec(`DELETE FROM dal_locks`) // taken from under it; no heartbeat tells it
	if _, err := l.WriteAtomic(ctxT(t), AtomicWrite{Dir: dir, Name: "geom", Fill: fillVersion("stale")}); !errors.Is(err, ErrLost) {
		t.Errorf("commit by a holder whose grant is gone: %v, want ErrLost", err)
	}
	if got := visible(t, a, r, "geom"); got != "" {
		t.Errorf("visible %q", got)
	}
	_ = l.Release(ctxT(t))
}

// Issue 31, fault 5: a holder that stalls in WriteAtomic past its lease
// and grace, is taken over (the new holder commits its version), then
// resumes, must not delete the new holder's committed version in its
// clean-up. The stall is injected after it read the manifest.
func testAtomicWriteStalled(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A", Lease: time.Second, Heartbeat: -1})
	b := e.open(Options{Owner: "B", Grace: 100 * time.Millisecond})
	dir := t.TempDir()
	r := Map("stall")
	write := func(m *Manager, v string) {
		l := acquire(t, ctxT(t), m, r, Write)
		if _, err := l.WriteAtomic(ctxT(t), AtomicWrite{Dir: dir, Name: "tiles", Fill: fillVersion(v)}); err != nil {
			t.Errorf("write %s: %v", v, err)
		}
		release(t, l)
	}
	write(b, "first")
	stale := acquire(t, ctxT(t), a, r, Write)
	_, err := stale.WriteAtomic(ctxT(t), AtomicWrite{Dir: dir, Name: "tiles", Fill: fillVersion("stale"),
		afterStep: func(s string) error {
			if s == stepManifest {
				write(b, "taken over") // waits for A's lease to pass: A is stalled meanwhile
			}
			return nil
		}})
	if !errors.Is(err, ErrLost) {
		t.Errorf("the stalled holder's write: %v, want ErrLost", err)
	}
	if got := visible(t, b, r, "tiles"); got != "taken over" {
		t.Errorf("visible %q, want the new holder's version", got)
	}
}
