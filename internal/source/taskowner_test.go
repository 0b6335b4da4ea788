package source_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// Two tasks of one process, each with its own owner id (lockcore.WithOwner),
// and another process q: task a holds an advisory key and waits for q's
// Redis key; task b holds a lease; q waits for that lease. Nobody waits
// for a, so there is no deadlock, and the graph of a real snapshot finds
// none. Under the process's one owner id the same snapshot closes a cycle
// (p waits for q, q for p): the false deadlock the task owners prevent.
func TestTaskOwnersMakeNoFalseDeadlock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	proc := "p-" + strings.ReplaceAll(t.Name(), "/", "-")
	ownerA, ownerB := proc+"/a", proc+"/b"
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 2 })
	svc := lockcore.New(pool, lockcore.OwnerID(proc), lockcore.NoFencing())
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	p := redislock.New(rdb, redislock.Options{Owner: proc})
	defer p.Close()
	q := redislock.New(rdb, redislock.Options{Owner: "q"})
	defer q.Close()
	path := filepath.Join(t.TempDir(), "leases.db")
	pLeases, err := lease.OpenSQLite(ctx, path, lease.Options{Owner: proc})
	if err != nil {
		t.Fatal(err)
	}
	defer pLeases.Close()
	qLeases, err := lease.OpenSQLite(ctx, path, lease.Options{Owner: "q", Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer qLeases.Close()

	// b holds the lease first, so that it was granted before a's wait
	// began: a process's hold that could be the waiting task's own.
	b, err := pLeases.Acquire(lockcore.WithOwner(ctx, ownerB), lease.Map("m1"), lease.Write)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release(context.Background())
	if b.Owner() != ownerB {
		t.Errorf("lease owner %q, want the task's %q", b.Owner(), ownerB)
	}
	r1, err := q.Acquire(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Release(context.Background())
	actx := lockcore.WithOwner(ctx, ownerA)
	adv, err := svc.Acquire(actx, lockcore.HashKey("task-owner-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer adv.Release(context.Background())
	if adv.Owner() != ownerA {
		t.Errorf("advisory lock owner %q, want the task's %q", adv.Owner(), ownerA)
	}
	waits := make(chan error, 2)
	go func() { // a waits for q's Redis key
		l, err := p.Acquire(actx, "r1", lockcore.Wait(30*time.Second))
		if err == nil {
			err = l.Release(context.Background())
		}
		waits <- err
	}()
	go func() { // q waits for b's lease
		l, err := qLeases.Acquire(ctx, lease.Map("m1"), lease.Write)
		if err == nil {
			err = l.Release(context.Background())
		}
		waits <- err
	}()

	pg := source.Named("postgres", func(ctx context.Context) (model.Snapshot, error) {
		return pgsource.Inspect(ctx, pgtest.Conn(t))
	})
	rs := redissource.New(redistest.ClientOf(t, srv), redissource.Options{})
	defer rs.Close()
	srcs := []source.Source{pg, rs, leasesource.SQLite("lease", path)}
	var snap model.Snapshot
	for {
		snap = model.Merge(source.PollAll(ctx, srcs))
		var waiters []string
		for _, l := range snap.Locks {
			if !l.Granted && l.Kind != model.KindAdvisory {
				waiters = append(waiters, string(l.Kind)+"="+l.Owner)
			}
		}
		slices.Sort(waiters)
		if slices.Equal(waiters, []string{"lease=q", "redis=" + ownerA}) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the two waits never showed together; last waiters %v", waiters)
		}
		time.Sleep(20 * time.Millisecond) // polling the sources, not synchronising
	}
	for _, l := range snap.Locks {
		if l.Kind == model.KindAdvisory && l.EntityID == lockcore.HashKey("task-owner-test").EntityID() && l.Owner != ownerA {
			t.Errorf("the advisory backend carries owner %q, want the task's %q (application_name %q)", l.Owner, ownerA, l.Session().ApplicationName)
		}
	}
	if cs := waitfor.Build(&snap).Cycles(); len(cs) != 0 {
		t.Errorf("a deadlock with task owners: %s", cs[0].Summary())
	}
	// The control: one owner id per process makes the same waits a cycle.
	merged := snap
	merged.Locks = slices.Clone(snap.Locks)
	for i := range merged.Locks {
		l := &merged.Locks[i]
		if strings.HasPrefix(l.Owner, proc+"/") {
			l.Owner = proc
		}
		for j, o := range l.BlockedByOwners {
			if strings.HasPrefix(o, proc+"/") {
				l.BlockedByOwners = slices.Clone(l.BlockedByOwners)
				l.BlockedByOwners[j] = proc
			}
		}
	}
	if cs := waitfor.Build(&merged).Cycles(); len(cs) != 1 {
		t.Errorf("%d cycles under one owner per process, want the false one", len(cs))
	}
	// Unwind: q lets r1 go (a gets it), b lets the lease go (q gets it).
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-waits; err != nil {
			t.Error(err)
		}
	}
}
