package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
)

// stallFor is how long a stalled worker stalls: past its lease and the
// healthy nodes' grace, so that a waiter recovers its grant meanwhile.
func (j *Jobs) stallFor() time.Duration {
	return j.stall.Options().Lease + j.nodes[0].Options().Grace + j.opts.Lease/3
}

func doomedKey(r lease.Resource, fence int64) string {
	return r.String() + "/" + strconv.FormatInt(fence, 10)
}

// acquireDoomed takes r for writing on the stalled node and records the
// grant: the only kind a stale recovery may take.
func (j *Jobs) acquireDoomed(ctx context.Context, r lease.Resource) (*lease.Lock, error) {
	before := time.Now()
	l, err := j.stall.Acquire(ctx, r, lease.Write)
	if err != nil {
		return nil, err
	}
	j.doom(l, before)
	return l, nil
}

// doom records a grant of the stalled node, asked for at before.
func (j *Jobs) doom(l *lease.Lock, before time.Time) {
	j.mu.Lock()
	j.doomed[doomedKey(l.Resource(), l.Fence())] = &doomedGrant{owner: l.Owner(), before: before, lease: j.stall.Options().Lease}
	j.mu.Unlock()
}

// DieHolding is a worker that dies holding map m's write lock, half-way
// through writing its tile set: nobody releases the grant, its heartbeats
// stop, and the next taker of the map recovers it once it is stale (lease
// passed, heartbeat older than the grace, no job claiming it), with an
// audit record. With locking off it does nothing.
func (j *Jobs) DieHolding(ctx context.Context, m MapRef) error {
	if !j.env.Locking() {
		return nil
	}
	l, err := j.acquireDoomed(ctx, lease.Map(m.Map))
	if err != nil {
		return err
	}
	j.deaths.Add(1)
	_, _ = l.WriteAtomic(ctx, lease.AtomicWrite{Dir: j.mapDir(m.Map), Name: tilesName, Fill: func(tmp string) error {
		_ = writeTiles(ctx, tmp, j.newSet(), 0, tileCount/2, nil)
		return errInterrupted
	}})
	j.env.Rec.Note(KindMapWriter, lockcore.Key{}, fmt.Sprintf("map:%s: a worker died holding the write lease (fence %d) mid-write: the next taker recovers it once stale, audited",
		m.Map, l.Fence()))
	return nil
}

// Stall is a map writer whose heartbeats stall past its lease: it holds
// map m's write lock, stalls (no heartbeat, no work) past its lease and
// the grace, and must then find its lease lost and stop before writing.
// With locking off it does nothing.
func (j *Jobs) Stall(ctx context.Context, m MapRef) error {
	if !j.env.Locking() {
		return nil
	}
	o := j.op(KindMapWriter, "map:"+m.Map)
	r := lease.Map(m.Map)
	var l *lease.Lock
	before := time.Now()
	ran, err := o.under(ctx, j.stall, []lease.Request{{Resource: r, Mode: lease.Write}}, func(lctx context.Context) error {
		l = lease.LockOf(lctx, r)
		j.doom(l, before)
		j.stalls.Add(1)
		h, err := o.enter(lctx, r, lease.Write, l.Fence(), 0)
		if err != nil {
			return err
		}
		defer j.exit(h)
		j.env.Rec.Note(KindMapWriter, lockcore.Key{}, fmt.Sprintf("map:%s: a writer's heartbeats stall for %s (lease %s, fence %d)",
			m.Map, j.stallFor().Round(time.Millisecond), j.stall.Options().Lease, l.Fence()))
		if err := Pause(ctx, j.stallFor()); err != nil { // stalled: it watches nothing, not even its lock's context
			return err
		}
		j.env.at(ctx, PointStalled, 0)
		if lerr := l.Err(); lerr != nil {
			o.sec.stopped.Store(true)
			j.staleStopped.Add(1)
			return fmt.Errorf("map:%s: after the stall: %w", m.Map, lerr)
		}
		if err := j.writeSet(lctx, l, j.stall, m.Map, false); err != nil {
			o.sec.refused.Add(1)
			return err
		}
		return nil
	})
	if l != nil && !releaseFailed(err) {
		j.mu.Lock()
		j.doomed[doomedKey(r, l.Fence())].released = true
		j.mu.Unlock()
	}
	return o.end(ctx, ran, err)
}

// releaseFailed reports whether err, as With returns it, holds a failed
// release: the row was taken over (or removed) before it, or the database
// did not answer. A lock lost to its own lease, with nobody taking it
// over, is freed by the release: that is no failure.
func releaseFailed(err error) bool {
	if le, ok := err.(*lease.Error); ok && le.Op == "release" {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(u.Unwrap(), releaseFailed)
	case interface{ Unwrap() error }:
		return releaseFailed(u.Unwrap())
	}
	return false
}

// Flood queues n map jobs of the flooding project at once (writes and
// exports), each on its own goroutine through spawn.
func (j *Jobs) Flood(n int, spawn func(func(context.Context))) {
	p := j.Projects()[0]
	for i := range n {
		m := j.PickMap(p)
		spawn(func(ctx context.Context) {
			if i%2 == 0 {
				_ = j.MapWrite(ctx, m)
			} else {
				_ = j.MapRead(ctx, m, true)
			}
		})
	}
}

// Audit checks, once the jobs have stopped, what the live checks cannot:
//
//   - every map's committed tile set is whole (one set, every tile);
//   - every stale recovery since the run began of a grant of this
//     process's nodes took a grant of the stalled node (heartbeats off: the
//     only stale ones) after its lease and the grace had passed, and every
//     such grant that is gone and that its worker did not release was
//     recovered with an audit record;
//   - no lock or job of the healthy nodes is left.
func (j *Jobs) Audit(ctx context.Context) error {
	var errs []error
	node := j.nodes[0]
	for _, p := range j.Projects() {
		for _, m := range j.Maps(p) {
			e, ok, err := node.Manifest(ctx, lease.Map(m.Map), tilesName)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok || !readable(e.Path) {
				continue
			}
			_, torn, err := checkTiles(e.Path)
			if err != nil {
				errs = append(errs, err)
			} else if torn != "" {
				j.report(InvTileSet, "map:"+m.Map+":"+torn, fmt.Sprintf("map:%s: the committed tile set is torn: %s", m.Map, torn))
			}
		}
	}
	recs, err := node.Audit(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("audit of recoveries: %w", err))
	}
	locks, err := node.Locks(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("audit of leases: %w", err))...)
	}
	jobs, err := node.Jobs(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("audit of jobs: %w", err))...)
	}
	ours := func(owner string) bool {
		return strings.HasPrefix(owner, j.env.Proc+"/") || strings.HasPrefix(owner, "job:"+j.env.Proc+"-")
	}
	grace := node.Options().Grace
	since := j.env.Since()
	j.mu.Lock()
	defer j.mu.Unlock()
	audited := map[string]bool{}
	var n int64
	for _, r := range recs {
		// Only this process's grants can be judged: another process's
		// heartbeats are not known here (a killed one's grants are rightly
		// stale).
		if r.At.Before(since) || !ours(r.VictimOwner) {
			continue
		}
		n++
		k := doomedKey(r.Resource, r.VictimFence)
		audited[k] = true
		g := j.doomed[k]
		switch {
		case g == nil:
			j.report(InvRecovery, "recovery:"+k, fmt.Sprintf("%s: %s recovered the grant of %s (fence %d), whose heartbeats ran: it was not stale",
				r.Resource, r.Actor, r.VictimOwner, r.VictimFence))
		case r.At.Before(g.before.Add(max(g.lease, grace) - 20*time.Millisecond)):
			j.report(InvRecovery, "recovery:"+k, fmt.Sprintf("%s: %s recovered the grant of %s (fence %d) %s after it was asked for, before its lease (%s) and the grace (%s) had passed",
				r.Resource, r.Actor, r.VictimOwner, r.VictimFence, r.At.Sub(g.before).Round(time.Millisecond), g.lease, grace))
		}
	}
	j.recoveries.Store(n)
	granted := map[string]bool{}
	for _, in := range locks {
		if !in.Granted {
			continue
		}
		granted[doomedKey(in.Resource, in.Fence)] = true
		if ours(in.Owner) && in.Owner != j.stall.Options().Owner {
			j.report(InvNoLeaks, "lease:"+doomedKey(in.Resource, in.Fence),
				fmt.Sprintf("%s still held by %s (%s, fence %d) after the jobs stopped", in.Resource, in.Owner, in.Mode, in.Fence))
		}
	}
	for k, g := range j.doomed {
		if g.checked || g.released || granted[k] {
			continue
		}
		g.checked = true // gone: judged once
		if !audited[k] {
			j.report(InvRecovery, "taken:"+k, fmt.Sprintf("%s: the stalled node's grant is gone, neither released nor recovered with an audit record", k))
		}
	}
	for _, jb := range jobs {
		if ours(jb.Process) {
			j.report(InvNoLeaks, "job:"+jb.ID, fmt.Sprintf("job %s (%s, project %s) still %s after the jobs stopped", jb.ID, jb.Kind, jb.Project,
				map[bool]string{true: "running", false: "queued"}[jb.Running]))
		}
	}
	return errors.Join(errs...)
}
