package workers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/model"
)

// errInterrupted is how an interrupted write stops.
var errInterrupted = errors.New("write interrupted mid-sequence")

// takeLocks takes reqs on node with ctx: all or none, in the global order.
// With locking off it takes nothing.
func (j *Jobs) takeLocks(ctx context.Context, node *lease.Manager, reqs ...lease.Request) ([]*lease.Lock, error) {
	if !j.env.Locking() {
		return nil, nil
	}
	if len(reqs) == 1 {
		l, err := node.Acquire(ctx, reqs[0].Resource, reqs[0].Mode)
		if err != nil {
			return nil, err
		}
		return []*lease.Lock{l}, nil
	}
	return node.AcquireAll(ctx, reqs...)
}

// enterAll registers a hold per request, under the locks' fences (0 with
// none).
func (o *op) enterAll(ctx context.Context, locks []*lease.Lock, reqs ...lease.Request) ([]*hold, error) {
	var hs []*hold
	for _, r := range reqs {
		var fence int64
		for _, l := range locks {
			if l.Resource() == r.Resource {
				fence = l.Fence()
			}
		}
		h, err := o.enter(ctx, r.Resource, r.Mode, fence, 0)
		if err != nil {
			o.j.exit(hs...)
			return nil, err
		}
		hs = append(hs, h)
	}
	o.j.env.at(ctx, PointHoldEntered, 0)
	return hs, nil
}

// release releases locks, newest first; a lock lost meanwhile makes the
// error wrap lease.ErrLost.
func release(ctx context.Context, locks []*lease.Lock) error {
	var errs []error
	for i := len(locks) - 1; i >= 0; i-- {
		errs = append(errs, locks[i].Release(context.WithoutCancel(ctx)))
	}
	return errors.Join(errs...)
}

// releaseAfter releases locks once the work under them ended with err,
// and returns both errors joined, as lockcore.With does: a lease lost
// while the work failed (ErrLost) is still counted as lost.
func releaseAfter(ctx context.Context, locks []*lease.Lock, err error) error {
	return errors.Join(err, release(ctx, locks))
}

func lockOf(locks []*lease.Lock, r lease.Resource) *lease.Lock {
	for _, l := range locks {
		if l.Resource() == r {
			return l
		}
	}
	return nil
}

// writeSet writes a new tile set of map m: with its write lock, by the
// §5.1 sequence (lease.Lock.WriteAtomic), so readers see the old set or
// the new one; without (locking off), in place, tile by tile, into the
// committed directory, as code that skips the sequence would. An
// interrupted write stops half-way.
func (j *Jobs) writeSet(ctx context.Context, l *lease.Lock, node *lease.Manager, m string, interrupt bool) error {
	tm := *j.timing.Load()
	pause := tm.Tiles / tileCount
	set := j.newSet()
	half := func() { j.env.at(ctx, PointTilesHalf, 0) }
	n := tileCount
	if interrupt {
		n /= 2
		j.interrupted.Add(1)
	}
	if l == nil {
		e, ok, err := node.Manifest(ctx, lease.Map(m), tilesName)
		if err != nil || !ok || !readable(e.Path) {
			return err
		}
		if err := writeTiles(ctx, e.Path, set, pause, n, half); err != nil {
			return err
		}
		if interrupt {
			return errInterrupted
		}
		j.tileSets.Add(1)
		return nil
	}
	_, err := l.WriteAtomic(l.Context(), lease.AtomicWrite{Dir: j.mapDir(m), Name: tilesName, Fill: func(tmp string) error {
		if err := writeTiles(ctx, tmp, set, pause, n, half); err != nil {
			return err
		}
		if interrupt {
			return errInterrupted
		}
		return nil
	}})
	if err == nil {
		j.tileSets.Add(1)
	}
	return err
}

// readSet reads map m's committed tile set and reports it if torn.
func (j *Jobs) readSet(ctx context.Context, node *lease.Manager, kind Kind, m string) error {
	e, ok, err := node.Manifest(ctx, lease.Map(m), tilesName)
	if err != nil || !ok {
		return err
	}
	_, torn, err := checkTiles(e.Path)
	if err != nil {
		return fmt.Errorf("reading the tile set of %s: %w", m, err)
	}
	if torn != "" {
		j.report(InvTileSet, "read:"+m+":"+torn, fmt.Sprintf("map:%s: %s read a torn tile set: %s", m, kind, torn))
		return nil
	}
	j.reads.Add(1)
	return nil
}

// MapWrite is a tile generation or calibration job on map m: a slot under
// the caps, the project's read lock and the map's write lock (AcquireAll),
// and a new tile set written with the §5.1 sequence.
func (j *Jobs) MapWrite(ctx context.Context, m MapRef) error {
	o := j.op(KindMapWriter, "map:"+m.Map)
	interrupt := take(&j.interrupt)
	kind := "tiles"
	if rand.IntN(3) == 0 {
		kind = "calibration"
	}
	s, err := j.startJob(ctx, kind, m.Project, m.Map)
	if err != nil {
		o.attempt(classify(ctx, err), err, false)
		return err
	}
	defer s.done()
	reqs := []lease.Request{{Resource: lease.Project(m.Project), Mode: lease.Read}, {Resource: lease.Map(m.Map), Mode: lease.Write}}
	locks, err := j.takeLocks(s.ctx, s.node, reqs...)
	if err != nil {
		o.attempt(classify(ctx, err), err, false)
		return err
	}
	o.attempt(model.OutcomeAcquired, nil, false)
	err = j.mapWriteBody(ctx, o, s.node, locks, reqs, m.Map, interrupt)
	err = releaseAfter(ctx, locks, err)
	if errors.Is(err, errInterrupted) {
		j.env.Rec.Note(KindMapWriter, lockcore.Key{}, "map:"+m.Map+": write interrupted half-way through its tile set")
		return nil
	}
	return o.failed(ctx, err)
}

func (j *Jobs) mapWriteBody(ctx context.Context, o *op, node *lease.Manager, locks []*lease.Lock, reqs []lease.Request, m string, interrupt bool) error {
	hs, err := o.enterAll(ctx, locks, reqs...)
	if err != nil {
		return err
	}
	defer j.exit(hs...)
	if err := sleep(ctx, j.timing.Load().Step); err != nil {
		return err
	}
	if err := j.writeSet(ctx, lockOf(locks, lease.Map(m)), node, m, interrupt); err != nil {
		return err
	}
	j.env.Rec.Section(KindMapWriter)
	return nil
}

// MapRead is a viewer (export false) or an export job (a slot under the
// caps): the map's read lock, and its committed tile set read whole.
func (j *Jobs) MapRead(ctx context.Context, m MapRef, export bool) error {
	o := j.op(KindMapReader, "map:"+m.Map)
	node, lctx := j.node(), ctx
	if export {
		s, err := j.startJob(ctx, "export", m.Project, m.Map)
		if err != nil {
			o.attempt(classify(ctx, err), err, false)
			return err
		}
		defer s.done()
		node, lctx = s.node, s.ctx
	}
	req := lease.Request{Resource: lease.Map(m.Map), Mode: lease.Read}
	locks, err := j.takeLocks(lctx, node, req)
	if err != nil {
		o.attempt(classify(ctx, err), err, false)
		return err
	}
	o.attempt(model.OutcomeAcquired, nil, false)
	err = func() error {
		hs, err := o.enterAll(ctx, locks, req)
		if err != nil {
			return err
		}
		defer j.exit(hs...)
		if err := j.readSet(ctx, node, KindMapReader, m.Map); err != nil {
			return err
		}
		if err := sleep(ctx, j.timing.Load().Step); err != nil {
			return err
		}
		j.env.Rec.Section(KindMapReader)
		return nil
	}()
	err = releaseAfter(ctx, locks, err)
	return o.failed(ctx, err)
}

// SketchEdit edits sketch s under its write lock: a read-modify-write of
// its version.
func (j *Jobs) SketchEdit(ctx context.Context, s string) error {
	o := j.op(KindSketch, "sketch:"+s)
	node := j.node()
	req := lease.Request{Resource: lease.Sketch(s), Mode: lease.Write}
	locks, err := j.takeLocks(ctx, node, req)
	if err != nil {
		o.attempt(classify(ctx, err), err, false)
		return err
	}
	o.attempt(model.OutcomeAcquired, nil, false)
	err = func() error {
		hs, err := o.enterAll(ctx, locks, req)
		if err != nil {
			return err
		}
		defer j.exit(hs...)
		return j.editSketch(ctx, s)
	}()
	if err == nil {
		j.env.Rec.Section(KindSketch)
	}
	err = releaseAfter(ctx, locks, err)
	return o.failed(ctx, err)
}

func (j *Jobs) editSketch(ctx context.Context, s string) error {
	var v int64
	if err := j.env.DB.Get(ctx, "SELECT version FROM sketches WHERE id = $1", []any{s}, &v); err != nil {
		return fmt.Errorf("reading sketch %s: %w", s, err)
	}
	if err := sleep(ctx, j.timing.Load().Step); err != nil {
		return err
	}
	if _, err := j.env.DB.Exec(ctx, "UPDATE sketches SET version = $2 WHERE id = $1", s, v+1); err != nil {
		return fmt.Errorf("writing sketch %s: %w", s, err)
	}
	return nil
}

// Bulk is a bulk project job: a slot, then the project's write lock, two
// of its maps' and one sketch's (AcquireAll: the global order, whatever
// order they are asked in), with bounded retries; it writes the maps' tile
// sets and the sketch. It must end within its retries' bound: a job that
// does not is a deadlock.
func (j *Jobs) Bulk(ctx context.Context, project string) error {
	o := j.op(KindBulk, "project:"+project)
	s, err := j.startJob(ctx, "bulk", project, "")
	if err != nil {
		o.attempt(classify(ctx, err), err, false)
		return err
	}
	defer s.done()
	maps := j.Maps(project)
	rand.Shuffle(len(maps), func(a, b int) { maps[a], maps[b] = maps[b], maps[a] })
	maps = maps[:min(2, len(maps))]
	reqs := []lease.Request{{Resource: lease.Project(project), Mode: lease.Write}, {Resource: lease.Sketch(j.PickSketch(project)), Mode: lease.Write}}
	for _, m := range maps {
		reqs = append(reqs, lease.Request{Resource: lease.Map(m.Map), Mode: lease.Write})
	}
	rand.Shuffle(len(reqs), func(a, b int) { reqs[a], reqs[b] = reqs[b], reqs[a] })
	bound := time.Duration(j.opts.BulkAttempts) * (j.opts.Wait + time.Second)
	start := time.Now()
	var locks []*lease.Lock
	for a := range j.opts.BulkAttempts {
		if locks, err = j.takeLocks(s.ctx, s.node, reqs...); err == nil || !errors.Is(err, lease.ErrTimeout) || a == j.opts.BulkAttempts-1 {
			break
		}
		j.bulkRetries.Add(1)
		if perr := sleep(ctx, time.Duration(50<<a)*time.Millisecond); perr != nil {
			err = perr
			break
		}
	}
	if d := time.Since(start); d > bound {
		j.report(InvDeadlock, "bulk:"+o.label+":"+start.Format(time.RFC3339Nano),
			fmt.Sprintf("%s: a bulk job's locks took %s, past its bound of %d tries (%s)", o.label, d.Round(time.Millisecond), j.opts.BulkAttempts, bound))
	}
	if err != nil {
		o.attempt(classify(ctx, err), err, false)
		return err
	}
	o.attempt(model.OutcomeAcquired, nil, false)
	err = func() error {
		hs, err := o.enterAll(ctx, locks, reqs...)
		if err != nil {
			return err
		}
		defer j.exit(hs...)
		for _, r := range reqs {
			switch r.Resource.Level {
			case lease.LevelMap:
				err = j.writeSet(ctx, lockOf(locks, r.Resource), s.node, r.Resource.ID, false)
			case lease.LevelSketch:
				err = j.editSketch(ctx, r.Resource.ID)
			}
			if err != nil {
				return err
			}
		}
		j.env.Rec.Section(KindBulk)
		return nil
	}()
	err = releaseAfter(ctx, locks, err)
	return o.failed(ctx, err)
}

// Upgrader takes map m upgradeable, reads its tile set, and with
// Timing.WriteShare decides to write: it upgrades (once the readers have
// left) and writes a new tile set.
func (j *Jobs) Upgrader(ctx context.Context, m MapRef) error {
	return j.upgrader(ctx, m, rand.Float64() < j.timing.Load().WriteShare)
}

// UpgradeAndWrite is an upgradeable reader that decides to write.
func (j *Jobs) UpgradeAndWrite(ctx context.Context, m MapRef) error { return j.upgrader(ctx, m, true) }

func (j *Jobs) upgrader(ctx context.Context, m MapRef, write bool) error {
	o := j.op(KindUpgrader, "map:"+m.Map)
	node := j.node()
	req := lease.Request{Resource: lease.Map(m.Map), Mode: lease.Upgradeable}
	locks, err := j.takeLocks(ctx, node, req)
	if err != nil {
		o.attempt(classify(ctx, err), err, false)
		return err
	}
	o.attempt(model.OutcomeAcquired, nil, false)
	err = func() error {
		hs, err := o.enterAll(ctx, locks, req)
		if err != nil {
			return err
		}
		h := hs[0]
		defer func() { j.exit(h) }()
		if err := j.readSet(ctx, node, KindUpgrader, m.Map); err != nil {
			return err
		}
		j.env.at(ctx, PointTilesRead, 0)
		if !write {
			j.env.Rec.Section(KindUpgrader)
			return nil
		}
		l := lockOf(locks, req.Resource)
		var fence int64
		if l != nil {
			if err := l.Upgrade(ctx); err != nil {
				return err
			}
			fence = l.Fence()
			j.upgrades.Add(1)
		}
		w, err := o.enter(ctx, req.Resource, lease.Write, fence, h.id)
		if err != nil {
			return err
		}
		j.exit(h)
		h = w
		if err := j.writeSet(ctx, l, node, m.Map, false); err != nil {
			return err
		}
		j.env.Rec.Section(KindUpgrader)
		return nil
	}()
	err = releaseAfter(ctx, locks, err)
	return o.failed(ctx, err)
}
