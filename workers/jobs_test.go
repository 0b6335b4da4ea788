package workers_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

var leaseSeq atomic.Int32

// newJobs is a world with seed 004's job system on a lease store of the
// test's own: a PostgreSQL schema, or a SQLite file.
func newJobs(t *testing.T, store string, opts workers.JobOptions) (*world, *workers.Jobs) {
	t.Helper()
	w := newWorld(t, 1)
	dir := t.TempDir()
	switch store {
	case "postgres":
		schema := fmt.Sprintf("lease_wt_%d", leaseSeq.Add(1))
		pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 12 })
		opts.Open = func(ctx context.Context, o lease.Options) (*lease.Manager, error) {
			o.Schema = schema
			return lease.OpenPostgres(ctx, pool, o)
		}
	case "sqlite":
		path := filepath.Join(dir, "leases.db")
		opts.Open = func(ctx context.Context, o lease.Options) (*lease.Manager, error) {
			return lease.OpenSQLite(ctx, path, o)
		}
	}
	opts.Dir = dir
	opts.Projects = max(opts.Projects, 2)
	j, err := workers.NewJobs(context.Background(), w.env, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	return w, j
}

// waitLeaseWaiter polls until someone waits for resource r.
func waitLeaseWaiter(t *testing.T, j *workers.Jobs, r lease.Resource) {
	t.Helper()
	pgtest.Eventually(t, "a waiter on "+r.String(), func() bool {
		infos, err := j.Node().Locks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.Resource == r && !in.Granted {
				return true
			}
		}
		return false
	})
}

// jobRace is one of seed 004's races on one resource: the first stops at
// point, the second runs (without locks: to its end, inside the first's
// section; with locks: it queues on waitOn).
type jobRace struct {
	name          string
	point         workers.Point
	first, second func(ctx context.Context, j *workers.Jobs) error
	waitOn        lease.Resource
	waitJob       bool // with locks the second waits for a job slot, not a lock
	invs          []workers.Invariant
}

var m1 = workers.MapRef{Project: "p1", Map: "p1-m1"}

var jobRaces = []jobRace{
	{
		name: "a viewer reads a tile set being written", point: workers.PointTilesHalf,
		first:  func(ctx context.Context, j *workers.Jobs) error { return j.MapWrite(ctx, m1) },
		second: func(ctx context.Context, j *workers.Jobs) error { return j.MapRead(ctx, m1, false) },
		waitOn: lease.Map(m1.Map),
		invs:   []workers.Invariant{workers.InvExclusiveWriter, workers.InvTileSet},
	},
	{
		name: "two sketch edits", point: workers.PointHoldEntered,
		first:  func(ctx context.Context, j *workers.Jobs) error { return j.SketchEdit(ctx, "p1-s1") },
		second: func(ctx context.Context, j *workers.Jobs) error { return j.SketchEdit(ctx, "p1-s1") },
		waitOn: lease.Sketch("p1-s1"),
		invs:   []workers.Invariant{workers.InvExclusiveWriter},
	},
	{
		name: "two upgradeable readers decide to write", point: workers.PointTilesRead,
		first:  func(ctx context.Context, j *workers.Jobs) error { return j.UpgradeAndWrite(ctx, m1) },
		second: func(ctx context.Context, j *workers.Jobs) error { return j.UpgradeAndWrite(ctx, m1) },
		waitOn: lease.Map(m1.Map),
		invs:   []workers.Invariant{workers.InvExclusiveWriter},
	},
	{
		name: "a bulk job beside a map writer", point: workers.PointHoldEntered,
		first:  func(ctx context.Context, j *workers.Jobs) error { return j.Bulk(ctx, "p2") },
		second: func(ctx context.Context, j *workers.Jobs) error { return j.SketchEdit(ctx, "p2-s1") },
		waitOn: lease.Sketch("p2-s1"),
		invs:   []workers.Invariant{workers.InvExclusiveWriter},
	},
	{
		name: "two map jobs of one project", point: workers.PointHoldEntered,
		first: func(ctx context.Context, j *workers.Jobs) error { return j.MapWrite(ctx, m1) },
		second: func(ctx context.Context, j *workers.Jobs) error {
			return j.MapRead(ctx, workers.MapRef{Project: "p1", Map: "p1-m2"}, true)
		},
		waitJob: true,
		invs:    []workers.Invariant{workers.InvJobCaps},
	},
}

func TestJobRaces(t *testing.T) {
	for _, rc := range jobRaces {
		for _, locking := range []bool{false, true} {
			t.Run(rc.name+map[bool]string{false: "/no locks", true: "/locks"}[locking], func(t *testing.T) {
				// Parallel: a case mostly waits (a stopped first, a queued
				// second); each has a schema, lease tables and hooks of its
				// own and takes no advisory lock.
				t.Parallel()
				w, j := newJobs(t, "postgres", workers.JobOptions{Sketches: 1})
				ctx := context.Background()
				w.env.SetLocking(locking)
				b := w.hooks.stop(t, rc.point, 0)
				first := goErr(func() error { return rc.first(ctx, j) })
				b.wait(t)
				second := goErr(func() error { return rc.second(ctx, j) })
				switch {
				case !locking:
					if err := recv(t, second); err != nil {
						t.Fatal(err)
					}
				case rc.waitJob:
					waitQueuedJob(t, j)
				default:
					waitLeaseWaiter(t, j, rc.waitOn)
				}
				b.release()
				if err := recv(t, first); err != nil {
					t.Fatal(err)
				}
				if locking {
					if err := recv(t, second); err != nil {
						t.Fatal(err)
					}
				}
				if err := j.Audit(ctx); err != nil {
					t.Fatal(err)
				}
				if locking {
					w.rec.clean(t)
					return
				}
				for _, inv := range rc.invs {
					if w.rec.broken(inv) == 0 {
						t.Errorf("%s not caught without locks", inv)
					}
				}
			})
		}
	}
}

// waitQueuedJob polls until a job waits for a slot.
func waitQueuedJob(t *testing.T, j *workers.Jobs) {
	t.Helper()
	pgtest.Eventually(t, "a job queued", func() bool {
		jobs, err := j.Node().Jobs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, jb := range jobs {
			if !jb.Running {
				return true
			}
		}
		return false
	})
}

// Faults, on both stores: a worker dies holding a map's write lease
// mid-write, another's heartbeats stall past its lease (and a job's past
// its slot lease while the next job starts); the next writers
// recover the grants (audited), the stalled one stops before writing, and
// nothing breaks. An interrupted write leaves the old tile set whole.
func TestJobFaults(t *testing.T) {
	for _, store := range []string{"postgres", "sqlite"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel() // each store's case mostly waits for grants to go stale
			w, j := newJobs(t, store, workers.JobOptions{Lease: 2 * time.Second})
			ctx := context.Background()
			m2 := workers.MapRef{Project: "p1", Map: "p1-m2"}
			if err := j.DieHolding(ctx, m1); err != nil {
				t.Fatal(err)
			}
			if err := j.MapWrite(ctx, m1); err != nil { // waits for the dead grant to go stale, recovers it
				t.Fatal(err)
			}
			// The stalled writer's grant goes stale while it stalls: the
			// next writer recovers it and writes, before the stalled one
			// looks at its lease again.
			b := w.hooks.hold(t, workers.PointStalled, 0)
			stalled := goErr(func() error { return j.Stall(ctx, m2) })
			b.wait(t)
			if err := j.MapWrite(ctx, m2); err != nil {
				t.Fatal(err)
			}
			b.release()
			if err := recv(t, stalled); !errors.Is(err, lease.ErrLost) {
				t.Fatalf("the stalled writer: %v, want ErrLost", err)
			}
			j.InterruptNext()
			if err := j.MapWrite(ctx, m1); err != nil {
				t.Fatal(err)
			}
			if err := j.MapRead(ctx, m1, false); err != nil {
				t.Fatal(err)
			}
			if err := j.Audit(ctx); err != nil {
				t.Fatal(err)
			}
			// A job whose slot lease lapsed (heartbeats stalled, as under
			// load) is still registered while the store gives its slot to
			// the next job: the caps hold by the store's clock, and the
			// check must not count it (seen broken in make test: "2 map
			// jobs of it (cap 1)").
			actx, doneA, err := workers.StartJob(ctx, j, m1, true)
			if err != nil {
				t.Fatal(err)
			}
			_, doneB, err := workers.StartJob(ctx, j, m1, false) // queued until A's slot lapses
			if err != nil {
				t.Fatal(err)
			}
			doneB()
			doneA()
			if cause := context.Cause(actx); !errors.Is(cause, lease.ErrLost) {
				t.Errorf("the stalled job's slot: %v, want ErrLost", cause)
			}
			w.rec.clean(t)
			st := j.Stats()
			if st.Recoveries != 2 || st.StaleStopped != 1 || st.Interrupted != 1 || st.Deaths != 1 {
				t.Errorf("stats %+v: want 2 recoveries, 1 stale stop, 1 interrupted write, 1 death", st)
			}
			if n := w.rec.count(workers.KindMapWriter, model.OutcomeLost); n != 1 {
				t.Errorf("%d lost map writers, want 1 (the stalled one)", n)
			}
		})
	}
}

// Without locks an interrupted write is done in place: the tile set is
// left torn, which the audit catches.
func TestInterruptedWriteWithoutLocks(t *testing.T) {
	w, j := newJobs(t, "sqlite", workers.JobOptions{})
	ctx := context.Background()
	w.env.SetLocking(false)
	j.InterruptNext()
	if err := j.MapWrite(ctx, m1); err != nil {
		t.Fatal(err)
	}
	if err := j.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	if w.rec.broken(workers.InvTileSet) == 0 {
		t.Error("the torn tile set was not caught")
	}
}
