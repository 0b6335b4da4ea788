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

// under runs fn under reqs taken on node with lctx (the job's context, or
// the worker's): all or none, in the global order (lease.Manager.WithAll),
// released when fn returns. The attempt is recorded as acquired as fn
// starts; ran reports whether it did. With locking off it takes nothing.
func (o *op) under(lctx context.Context, node *lease.Manager, reqs []lease.Request, fn func(ctx context.Context) error) (ran bool, err error) {
	body := func(ctx context.Context) error {
		ran = true
		o.attempt(model.OutcomeAcquired, nil, false)
		return fn(ctx)
	}
	if !o.j.env.Locking() {
		return ran, body(lctx)
	}
	return ran, node.WithAll(lctx, reqs, body)
}

// end records how an op that ran under (ran) ended with err, classified
// against the worker's ctx: an acquire that failed, or a body that did
// (an interrupted write is no failure), and returns err.
func (o *op) end(ctx context.Context, ran bool, err error) error {
	switch {
	case !ran:
		o.attempt(classify(ctx, err), err, false)
		return err
	case errors.Is(err, errInterrupted):
		return err
	}
	return o.failed(ctx, err)
}

// enterAll registers a hold per request, under the fences of the locks ctx
// holds (0 with none).
func (o *op) enterAll(ctx context.Context, reqs ...lease.Request) ([]*hold, error) {
	var hs []*hold
	for _, r := range reqs {
		var fence int64
		if l := lease.LockOf(ctx, r.Resource); l != nil {
			fence = l.Fence()
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
// the caps, the project's read lock and the map's write lock (WithAll),
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
		return o.end(ctx, false, err)
	}
	defer s.done()
	reqs := []lease.Request{{Resource: lease.Project(m.Project), Mode: lease.Read}, {Resource: lease.Map(m.Map), Mode: lease.Write}}
	ran, err := o.under(s.ctx, s.node, reqs, func(ctx context.Context) error {
		hs, err := o.enterAll(ctx, reqs...)
		if err != nil {
			return err
		}
		defer j.exit(hs...)
		if err := sleep(ctx, j.timing.Load().Step); err != nil {
			return err
		}
		if err := j.writeSet(ctx, lease.LockOf(ctx, lease.Map(m.Map)), s.node, m.Map, interrupt); err != nil {
			return err
		}
		j.env.Rec.Section(KindMapWriter)
		return nil
	})
	if errors.Is(o.end(ctx, ran, err), errInterrupted) {
		j.env.Rec.Note(KindMapWriter, lockcore.Key{}, "map:"+m.Map+": write interrupted half-way through its tile set")
		return nil
	}
	return err
}

// MapRead is a viewer (export false) or an export job (a slot under the
// caps): the map's read lock, and its committed tile set read whole.
func (j *Jobs) MapRead(ctx context.Context, m MapRef, export bool) error {
	o := j.op(KindMapReader, "map:"+m.Map)
	node, lctx := j.node(), ctx
	if export {
		s, err := j.startJob(ctx, "export", m.Project, m.Map)
		if err != nil {
			return o.end(ctx, false, err)
		}
		defer s.done()
		node, lctx = s.node, s.ctx
	}
	req := lease.Request{Resource: lease.Map(m.Map), Mode: lease.Read}
	ran, err := o.under(lctx, node, []lease.Request{req}, func(ctx context.Context) error {
		hs, err := o.enterAll(ctx, req)
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
	})
	return o.end(ctx, ran, err)
}

// SketchEdit edits sketch s under its write lock: a read-modify-write of
// its version.
func (j *Jobs) SketchEdit(ctx context.Context, s string) error {
	o := j.op(KindSketch, "sketch:"+s)
	req := lease.Request{Resource: lease.Sketch(s), Mode: lease.Write}
	ran, err := o.under(ctx, j.node(), []lease.Request{req}, func(ctx context.Context) error {
		hs, err := o.enterAll(ctx, req)
		if err != nil {
			return err
		}
		defer j.exit(hs...)
		if err := j.editSketch(ctx, s); err != nil {
			return err
		}
		j.env.Rec.Section(KindSketch)
		return nil
	})
	return o.end(ctx, ran, err)
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
// of its maps' and one sketch's (WithAll: the global order, whatever
// order they are asked in), with bounded retries; it writes the maps' tile
// sets and the sketch. It must end within its retries' bound: a job that
// does not is a deadlock.
func (j *Jobs) Bulk(ctx context.Context, project string) error {
	o := j.op(KindBulk, "project:"+project)
	s, err := j.startJob(ctx, "bulk", project, "")
	if err != nil {
		return o.end(ctx, false, err)
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
	checked := false
	checkBound := func() { // once the locks are taken, or the tries given up
		if d := time.Since(start); d > bound && !checked {
			j.report(InvDeadlock, "bulk:"+o.label+":"+start.Format(time.RFC3339Nano),
				fmt.Sprintf("%s: a bulk job's locks took %s, past its bound of %d tries (%s)", o.label, d.Round(time.Millisecond), j.opts.BulkAttempts, bound))
		}
		checked = true
	}
	body := func(ctx context.Context) error {
		checkBound()
		hs, err := o.enterAll(ctx, reqs...)
		if err != nil {
			return err
		}
		defer j.exit(hs...)
		for _, r := range reqs {
			switch r.Resource.Level {
			case lease.LevelMap:
				err = j.writeSet(ctx, lease.LockOf(ctx, r.Resource), s.node, r.Resource.ID, false)
			case lease.LevelSketch:
				err = j.editSketch(ctx, r.Resource.ID)
			}
			if err != nil {
				return err
			}
		}
		j.env.Rec.Section(KindBulk)
		return nil
	}
	var ran bool
	for a := range j.opts.BulkAttempts {
		if ran, err = o.under(s.ctx, s.node, reqs, body); ran || !errors.Is(err, lease.ErrTimeout) || a == j.opts.BulkAttempts-1 {
			break
		}
		j.bulkRetries.Add(1)
		if perr := sleep(ctx, time.Duration(50<<a)*time.Millisecond); perr != nil {
			err = perr
			break
		}
	}
	checkBound()
	return o.end(ctx, ran, err)
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
	ran, err := o.under(ctx, node, []lease.Request{req}, func(ctx context.Context) error {
		hs, err := o.enterAll(ctx, req)
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
		l := lease.LockOf(ctx, req.Resource)
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
	})
	return o.end(ctx, ran, err)
}
