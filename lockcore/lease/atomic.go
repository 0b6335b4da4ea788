package lease

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// AtomicWrite is one write of seed 004 §5.1's sequence (Lock.WriteAtomic).
type AtomicWrite struct {
	// Dir is the resource's directory, the seed's <target>; created if
	// missing. Its tmp subdirectory belongs to the sequence.
	Dir string
	// Name is what the write makes visible: the manifest row's name. Each
	// committed version is a directory <Dir>/<Name>.<fence>.<id>.
	Name string
	// Fill writes the files into the temporary directory it is given.
	Fill func(tmp string) error

	// afterStep, when set (by tests), runs after each step; an error stops
	// the sequence there as a crash would, leaving everything as it is.
	afterStep func(step string) error
}

// ManifestEntry is a manifest row: the committed version of a name.
type ManifestEntry struct {
	Resource  Resource
	Name      string
	Path      string // the committed directory
	Fence     int64  // the fence of the grant that committed it
	State     string // "committed"
	Committed time.Time
}

// errManifestRefused: the manifest transaction found the grant gone (or no
// longer a write), or the row committed by a later grant.
var errManifestRefused = errors.New("the manifest refused the commit")

// The steps of WriteAtomic, in order, as afterStep sees them.
const (
	stepManifest   = "manifest read"
	stepTmp        = "tmp dir created"
	stepFill       = "files written"
	stepSyncFiles  = "files fsynced"
	stepSyncTmp    = "tmp dir fsynced"
	stepDevice     = "same device checked"
	stepRename     = "renamed"
	stepSyncParent = "parent fsynced"
	stepCommit     = "manifest committed"
)

var atomicSteps = []string{stepManifest, stepTmp, stepFill, stepSyncFiles, stepSyncTmp, stepDevice, stepRename, stepSyncParent, stepCommit}

// WriteAtomic runs the write sequence of seed 004 §5.1 under l, which must
// be held in Write mode (step 1; releasing it, step 10, stays the
// caller's):
//
//  2. write files into <Dir>/tmp/<uuid>/ (w.Fill);
//  3. fsync each file; 4. fsync the tmp directory (and those under it);
//  5. check that the tmp and final directories are on the same device;
//  6. rename <Dir>/tmp/<uuid> to <Dir>/<Name>.<fence>.<id>;
//  7. fsync <Dir>, the parent of the final path;
//     8–9. in one transaction, mark the manifest row (resource, Name)
//     committed at the new path, checking that l still holds the resource
//     in write mode and that no later grant committed the row (the fence:
//     a holder that lost its lease cannot commit).
//
// Readers find the committed version with Manager.Manifest; until step 9
// commits, they see the previous one, whatever step a crash stops at.
//
// What it deletes: before step 2, after checking again that l holds its
// write grant (by its own lease timer and by the database's clock), the
// tmp directories and the uncommitted versions of Name that grants with a
// lower fence left (a crash's leftovers; fences are in the names:
// tmp/<fence>.<uuid>, <Name>.<fence>.<id>); after its own commit, the
// version it superseded, whose fence is lower. It never deletes the
// committed version, nor anything a grant with its fence or a higher one
// wrote: a holder that stalled past its lease and was taken over cannot
// remove its successor's work.
func (l *Lock) WriteAtomic(ctx context.Context, w AtomicWrite) (ManifestEntry, error) {
	fail := func(err error) (ManifestEntry, error) {
		return ManifestEntry{}, &Error{Op: "write atomic " + w.Name, Resource: l.res, Mode: l.Mode(), Err: err}
	}
	if err := l.Err(); err != nil {
		return fail(err)
	}
	if l.Mode() != Write {
		return fail(ErrNotWriteLocked)
	}
	if w.Name == "" || w.Name == "tmp" || strings.ContainsAny(w.Name, `/\`) || w.Name == "." || w.Name == ".." || w.Fill == nil {
		return fail(fmt.Errorf("lease: an atomic write needs a Fill and a plain Name (not %q)", w.Name))
	}
	fence, lockID := l.Fence(), l.res.String()
	dir := filepath.Clean(w.Dir)
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return fail(err)
	}
	prev, hasPrev, err := l.m.st.manifest(ctx, lockID, w.Name)
	if err != nil {
		return fail(err)
	}
	step := func(s string) error {
		if w.afterStep != nil {
			return w.afterStep(s)
		}
		return nil
	}
	if err := step(stepManifest); err != nil {
		return fail(err)
	}
	// The clean-up deletes: only while the lease holds (re-checked here,
	// after whatever stall came since the first check), and only what
	// grants older than this one left (the fence in each name), so a
	// holder that was taken over without noticing never removes its
	// successor's versions or temporary directories.
	if err := l.holdsWrite(ctx); err != nil {
		return fail(err)
	}
	if err := sweep(dir, w.Name, prev.Path, fence); err != nil {
		return fail(err)
	}

	id := uuid.NewString()
	tmp := filepath.Join(dir, "tmp", fmt.Sprintf("%d.%s", fence, id))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return fail(err)
	}
	if err := step(stepTmp); err != nil {
		return fail(err)
	}
	if err := w.Fill(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fail(err)
	}
	if err := step(stepFill); err != nil {
		return fail(err)
	}
	files, dirs, err := tree(tmp)
	if err == nil {
		err = syncAll(files)
	}
	if err == nil {
		err = step(stepSyncFiles)
	}
	if err == nil {
		err = syncAll(dirs)
	}
	if err == nil {
		err = step(stepSyncTmp)
	}
	if err == nil {
		err = sameDevice(tmp, dir)
	}
	if err == nil {
		err = step(stepDevice)
	}
	if err != nil {
		return fail(err)
	}
	final := filepath.Join(dir, fmt.Sprintf("%s.%d.%s", w.Name, fence, id[:8]))
	if err := os.Rename(tmp, final); err != nil {
		return fail(err)
	}
	if err := step(stepRename); err != nil {
		return fail(err)
	}
	if err := syncAll([]string{dir}); err != nil {
		return fail(err)
	}
	if err := step(stepSyncParent); err != nil {
		return fail(err)
	}
	at, err := l.m.st.commitManifest(ctx, l.token, lockID, w.Name, final, fence)
	if errors.Is(err, errManifestRefused) {
		return fail(fmt.Errorf("%w: the manifest refused fence %d (the lock is gone or a later grant committed)", ErrLost, fence))
	}
	if err != nil {
		return fail(err)
	}
	if err := step(stepCommit); err != nil {
		return fail(err)
	}
	// The superseded version is older than this grant's: the commit just
	// checked that no later grant had committed.
	if hasPrev && prev.Path != final && prev.Fence < fence {
		_ = os.RemoveAll(prev.Path)
		_ = syncAll([]string{dir})
	}
	return ManifestEntry{Resource: l.res, Name: w.Name, Path: final, Fence: fence, State: "committed", Committed: at}, nil
}

// Manifest returns the committed version of name for r, if there is one.
func (m *Manager) Manifest(ctx context.Context, r Resource, name string) (ManifestEntry, bool, error) {
	if m.isClosed() {
		return ManifestEntry{}, false, ErrClosed
	}
	e, ok, err := m.st.manifest(ctx, r.String(), name)
	e.Resource = r
	return e, ok, err
}

// holdsWrite is the lease check before a deletion: l must hold its write
// grant by its own reckoning and by the database's.
func (l *Lock) holdsWrite(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	ok, err := l.m.st.holdsWrite(ctx, l.token, l.res.String())
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: the write grant of fence %d is gone or its lease has passed", ErrLost, l.Fence())
	}
	return nil
}

// sweep removes what earlier writes of name left in dir: the tmp
// directories ("<fence>.<uuid>") and the versions ("<name>.<fence>.<id>")
// of grants older than fence, but the committed version (keep). What a
// grant at or above fence left is never touched: that is a later holder's
// (or this grant's own). A tmp directory whose name carries no fence
// (written before fences were put in its name) counts as the oldest.
func sweep(dir, name, keep string, fence int64) error {
	tmps, err := os.ReadDir(filepath.Join(dir, "tmp"))
	if err != nil {
		return err
	}
	for _, e := range tmps {
		f, _, _ := strings.Cut(e.Name(), ".")
		if n, err := strconv.ParseInt(f, 10, 64); err == nil && n >= fence {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, "tmp", e.Name())); err != nil {
			return err
		}
	}
	version := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\.(\d+)\.[0-9a-f]{8}$`)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		m := version.FindStringSubmatch(e.Name())
		if m == nil || p == keep {
			continue
		}
		if n, err := strconv.ParseInt(m[1], 10, 64); err != nil || n >= fence {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// tree lists the regular files under root, and its directories deepest
// first (so each is synced after what it contains).
func tree(root string) (files, dirs []string, err error) {
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			dirs = append(dirs, p)
		case d.Type().IsRegular():
			files = append(files, p)
		}
		return nil
	})
	slices.Reverse(dirs)
	return files, dirs, err
}

// syncAll fsyncs each path (files and directories alike).
func syncAll(paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("fsync %s: %w", p, err)
		}
	}
	return nil
}

// sameDevice reports ErrCrossDevice unless a and b are on one filesystem,
// where a rename is atomic.
func sameDevice(a, b string) error {
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		return err
	}
	if err := syscall.Stat(b, &sb); err != nil {
		return err
	}
	if sa.Dev != sb.Dev {
		return fmt.Errorf("%w: %s and %s", ErrCrossDevice, a, b)
	}
	return nil
}
