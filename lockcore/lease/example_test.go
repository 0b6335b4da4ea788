package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/locktop/locktop/lockcore/lease"
)

// open returns a Manager on a SQLite file in a fresh temporary directory,
// and a function that closes it and removes the directory.
func open(owner string) (*lease.Manager, string, func()) {
	dir, err := os.MkdirTemp("", "lease-example")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "locks.db")
	m, err := lease.OpenSQLite(context.Background(), path, lease.Options{Owner: owner})
	if err != nil {
		panic(err)
	}
	return m, path, func() { m.Close(); os.RemoveAll(dir) }
}

func Example() {
	ctx := context.Background()
	m, _, done := open("importer")
	defer done()

	l, err := m.Acquire(ctx, lease.Map("m1"), lease.Write)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Work under l.Context(): it is cancelled if the lock is lost.
	fmt.Println(l.Resource(), l.Mode(), "fence", l.Fence(), "err", l.Err())
	if err := l.Release(ctx); err != nil {
		fmt.Println(err)
	}
	l, _ = m.Acquire(ctx, lease.Map("m1"), lease.Write)
	fmt.Println("next grant: fence", l.Fence())
	l.Release(ctx)
	// Output:
	// map:m1 write fence 1 err <nil>
	// next grant: fence 2
}

func ExampleManager_TryAcquire() {
	ctx := context.Background()
	m, _, done := open("viewer")
	defer done()

	r1, _ := m.TryAcquire(ctx, lease.Sketch("s1"), lease.Read)
	r2, _ := m.TryAcquire(ctx, lease.Sketch("s1"), lease.Read) // readers share
	_, err := m.TryAcquire(ctx, lease.Sketch("s1"), lease.Write)
	fmt.Println("write while read:", errors.Is(err, lease.ErrLocked))
	r1.Release(ctx)
	r2.Release(ctx)
	w, err := m.TryAcquire(ctx, lease.Sketch("s1"), lease.Write)
	fmt.Println("write once free:", err)
	w.Release(ctx)
	// Output:
	// write while read: true
	// write once free: <nil>
}

func ExampleLock_Upgrade() {
	ctx := context.Background()
	m, _, done := open("calibrator")
	defer done()

	u, _ := m.Acquire(ctx, lease.Map("m1"), lease.Upgradeable)
	r, _ := m.Acquire(ctx, lease.Map("m1"), lease.Read) // coexists with the upgradeable holder
	before := u.Fence()
	r.Release(ctx) // Upgrade would wait (up to Options.Wait) for this reader
	if err := u.Upgrade(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(u.Mode(), u.Fence() > before)
	u.Release(ctx)
	// Output: write true
}

func ExampleManager_AcquireAll() {
	ctx := context.Background()
	m, _, done := open("tiler")
	defer done()

	locks, err := m.AcquireAll(ctx,
		lease.Request{Resource: lease.Sketch("s9"), Mode: lease.Write},
		lease.Request{Resource: lease.Project("p1"), Mode: lease.Read},
		lease.Request{Resource: lease.Map("m2"), Mode: lease.Write})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range locks {
		fmt.Println(l.Resource())
	}
	// Holding map:m2, a project lock would break the order.
	_, err = m.Acquire(locks[1].Context(), lease.Project("p2"), lease.Read)
	fmt.Println(errors.Is(err, lease.ErrLockOrder))
	for i := len(locks) - 1; i >= 0; i-- {
		locks[i].Release(ctx)
	}
	// Output:
	// project:p1
	// map:m2
	// sketch:s9
	// true
}

func ExampleManager_StartJob() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "lease-example")
	defer os.RemoveAll(dir)
	m, _ := lease.OpenSQLite(ctx, filepath.Join(dir, "locks.db"), lease.Options{MaxGlobalJobs: 2, MaxMapJobsPerProject: 1})
	defer m.Close()

	job, err := m.StartJob(ctx, lease.Job{ID: "tiles-7", Project: "p1", Map: "m1", Kind: "tiles"})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := m.Acquire(job.Context(), lease.Map("m1"), lease.Write) // owned by the job
	fmt.Println(l.Owner())
	if err := job.Finish(ctx); err != nil { // releases l and frees the slot
		fmt.Println(err)
	}
	fmt.Println(l.Err())
	// Output:
	// job:tiles-7
	// lock released
}

func ExampleLock_WriteAtomic() {
	ctx := context.Background()
	m, path, done := open("importer")
	defer done()
	target := filepath.Join(filepath.Dir(path), "maps", "m1")

	l, _ := m.Acquire(ctx, lease.Map("m1"), lease.Write)
	_, err := l.WriteAtomic(ctx, lease.AtomicWrite{Dir: target, Name: "floorplan", Fill: func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "plan.svg"), []byte("<svg/>"), 0o644)
	}})
	l.Release(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	e, ok, _ := m.Manifest(ctx, lease.Map("m1"), "floorplan")
	b, _ := os.ReadFile(filepath.Join(e.Path, "plan.svg"))
	fmt.Println(ok, e.State, e.Fence, string(b))
	// Output: true committed 1 <svg/>
}

func ExampleManager_Locks() {
	ctx := context.Background()
	m, _, done := open("editor")
	defer done()

	l, _ := m.Acquire(ctx, lease.Sketch("s1"), lease.Write)
	l.SetMetadata(ctx, map[string]any{"tool": "geometry"})
	locks, err := m.Locks(ctx) // every process's holders and waiters
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, i := range locks {
		fmt.Println(i.Resource, i.Mode, i.Owner, i.Granted, i.Metadata["tool"], i.LeaseLeft > 0)
	}
	l.Release(ctx)
	// Output:
	// sketch:s1 write editor true geometry true
}
