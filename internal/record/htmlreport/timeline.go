package htmlreport

import (
	"cmp"
	"slices"
	"time"

	"github.com/locktop/locktop/internal/record/incident"
	"github.com/locktop/locktop/model"
)

// Outcomes of a bar. A hold ends released, still held at the end of the
// span, or as the report's lease events say (expired, recovered, lost); a
// wait ends granted, given up, or still waiting. Either ends with its
// session when the recording says the session ended (model.SessionEnd):
// terminated, or ended for a reason the server does not prove.
const (
	Released     = "released"
	Held         = "held"
	Granted      = "granted"
	GaveUp       = "gave up"
	StillWait    = "waiting"
	Terminated   = model.EndTerminated
	SessionEnded = model.EndEnded
)

// Bar is one holder's hold of a key or one waiter's wait for it.
type Bar struct {
	Wait        bool
	Who         string // a pid, or an owner
	Application string
	Query       string
	Mode        string
	Start, End  time.Time
	Outcome     string
	// By is who terminated the session, when known ("locktop").
	By string
	// Root marks a hold by a root blocker of an episode, while it was one.
	Root bool
	// Count is how many bars this one stands for: more than one when bars
	// too short to tell apart were merged (MaxBars).
	Count int
}

// Lane is one key's bars, holds and waits, in order of their start.
type Lane struct {
	Key  string
	Kind string
	Bars []Bar
	// Waits counts the waits, Waited their total; Held the total time held.
	Waits  int
	Waited time.Duration
	Held   time.Duration
	// Dropped counts bars not drawn (MaxBars) after merging.
	Dropped int
}

// Point is the number of waiting rows in one snapshot.
type Point struct {
	At time.Time
	N  int
}

// Timeline is every key's lane over a span, and the queue over it.
type Timeline struct {
	From, To time.Time
	// Lanes are ordered by total wait, then time held, then key: the
	// keys people look for first.
	Lanes []*Lane
	Queue []Point
}

type laneID = model.KeyID

type holdID struct {
	key   model.KeyID
	who   string
	since int64
}

type waitID struct {
	key   model.KeyID
	who   string
	start int64
}

// Build reads the frames of f between rep.From and rep.To (as
// incident.Build chose them) into lanes, and takes the report's lease
// events and root blockers onto the bars. Review does the same without
// reading the frames again.
func Build(f incident.Frames, rep *incident.Report) (*Timeline, error) {
	b := newBuilder()
	for i := range f.Len() {
		t := f.Time(i)
		if t.Before(rep.From) || t.After(rep.To) {
			continue
		}
		s, err := f.Merged(i)
		if err != nil {
			return nil, err
		}
		b.add(t, s)
	}
	return b.finish(rep), nil
}

// Review builds the report (incident.Build) and its timeline in the same
// reading of the frames: each frame's snapshot, decoded for the report's
// first pass, feeds the lanes too (decoding is most of the cost of an
// hour of locks). Should the report read the frames in another order, the
// timeline reads them again itself.
func Review(f incident.Frames, server string, from, to time.Time) (*incident.Report, *Timeline, error) {
	tf := &tee{Frames: f, b: newBuilder(), next: -1}
	rep, err := incident.Build(tf, server, from, to)
	if err != nil {
		return nil, nil, err
	}
	// Fed every frame of the span once, in order (contiguous: the frames
	// fed lie within the span and are as many as it holds)?
	if tf.broken || tf.fed != rep.Snapshots {
		tl, err := Build(f, rep)
		return rep, tl, err
	}
	return rep, tf.b.finish(rep), nil
}

// tee hands the builder every frame the report reads for the first time,
// as long as it reads them in order without a gap.
type tee struct {
	incident.Frames
	b      *builder
	next   int // the index the builder takes next; -1 before the first
	fed    int
	broken bool // read out of order: the builder's lanes are not to be used
}

func (t *tee) Merged(i int) (model.Snapshot, error) {
	s, err := t.Frames.Merged(i)
	if err != nil || t.broken {
		return s, err
	}
	switch {
	case t.next < 0:
	case i < t.next:
		return s, nil // a later pass
	case i > t.next:
		t.broken = true
		return s, nil
	}
	t.b.add(t.Frames.Time(i), s)
	t.next, t.fed = i+1, t.fed+1
	return s, nil
}

// builder takes snapshots in order and keeps every key's bars.
type builder struct {
	lanes map[laneID]*Lane
	holds map[holdID]*Bar
	waits map[waitID]*Bar
	queue []Point
}

func newBuilder() *builder {
	return &builder{lanes: map[laneID]*Lane{}, holds: map[holdID]*Bar{}, waits: map[waitID]*Bar{}}
}

func (bd *builder) lane(l *model.Lock) {
	k := l.KeyID()
	if bd.lanes[k] == nil {
		kind := string(l.Kind)
		if kind == "" {
			kind = string(model.KindAdvisory)
		}
		bd.lanes[k] = &Lane{Key: l.KeyLabel(), Kind: kind}
	}
}

// add takes the snapshot taken at t.
func (bd *builder) add(t time.Time, s model.Snapshot) {
	if s.PollError() != "" {
		return // an outage ends no bar; the report marks it
	}
	lanes, holds, waits := bd.lanes, bd.holds, bd.waits
	seenH := map[holdID]bool{}
	seenW := map[waitID]bool{}
	holding := map[model.KeyID][]string{}
	n := 0
	for j := range s.Locks {
		l := &s.Locks[j]
		if l.Granted {
			since := l.HeldSince
			id := holdID{l.KeyID(), l.Holder(), since.UnixNano()}
			holding[id.key] = append(holding[id.key], id.who)
			seenH[id] = true
			if b := holds[id]; b != nil {
				b.End = t
				continue
			}
			if since.IsZero() || since.After(t) {
				since = t
			}
			holds[id] = &Bar{Who: l.Holder(), Application: l.Session().ApplicationName, Query: l.Session().Query, Mode: l.Mode,
				Start: since, End: t, Outcome: Held, Count: 1}
			bd.lane(l)
			continue
		}
		n++
		start := l.WaitStart
		if start.IsZero() || start.After(t) {
			start = t
		}
		id := waitID{l.KeyID(), l.Holder(), start.UnixNano()}
		seenW[id] = true
		if b := waits[id]; b != nil {
			b.End = t
			continue
		}
		waits[id] = &Bar{Wait: true, Who: l.Holder(), Application: l.Session().ApplicationName, Query: l.Session().Query, Mode: l.Mode,
			Start: start, End: t, Outcome: StillWait, Count: 1}
		bd.lane(l)
	}
	bd.queue = append(bd.queue, Point{t, n})
	// Bars not shown any more end: a hold released, a wait granted (its
	// waiter holds the key now) or given up. A later snapshot showing the
	// same hold again (same grant time) starts a new bar.
	for id, b := range holds {
		if !seenH[id] {
			b.Outcome = Released
			if e, ok := s.Ending(id.key.Server, id.who); ok {
				b.Outcome, b.By = e.Cause, e.By
			}
			lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
			delete(holds, id)
		}
	}
	for id, b := range waits {
		if !seenW[id] {
			b.Outcome = GaveUp
			if slices.Contains(holding[id.key], id.who) {
				b.Outcome = Granted
			} else if e, ok := s.Ending(id.key.Server, id.who); ok {
				b.Outcome, b.By = e.Cause, e.By
			}
			lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
			delete(waits, id)
		}
	}
}

// finish is the timeline of the snapshots taken, over rep's span.
func (bd *builder) finish(rep *incident.Report) *Timeline {
	tl := &Timeline{From: rep.From, To: rep.To, Queue: bd.queue}
	lanes := bd.lanes
	// Still held or waiting at the end: the lanes' sort orders them.
	for id, b := range bd.holds {
		lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
	}
	for id, b := range bd.waits {
		lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
	}
	for _, ln := range lanes {
		slices.SortFunc(ln.Bars, func(a, b Bar) int {
			return cmp.Or(a.Start.Compare(b.Start), model.CompareBool(a.Wait, b.Wait), cmp.Compare(a.Who, b.Who), a.End.Compare(b.End))
		})
		for _, b := range ln.Bars {
			if b.Wait {
				ln.Waits++
				ln.Waited += b.End.Sub(b.Start)
			} else {
				ln.Held += b.End.Sub(b.Start)
			}
		}
		tl.Lanes = append(tl.Lanes, ln)
	}
	slices.SortFunc(tl.Lanes, func(a, b *Lane) int {
		return cmp.Or(cmp.Compare(b.Waited, a.Waited), cmp.Compare(b.Held, a.Held), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Kind, b.Kind))
	})
	tl.mark(rep)
	return tl
}

// mark takes the report's lease events and root blockers onto the bars.
func (tl *Timeline) mark(rep *incident.Report) {
	byKey := map[string][]*Lane{}
	for _, ln := range tl.Lanes {
		byKey[ln.Key] = append(byKey[ln.Key], ln)
	}
	for _, ev := range rep.Leases {
		for _, ln := range byKey[ev.Key] {
			if ln.Kind != ev.Kind {
				continue
			}
			// The holder's last hold that began by the event.
			for i := len(ln.Bars) - 1; i >= 0; i-- {
				b := &ln.Bars[i]
				if !b.Wait && b.Who == ev.Holder && !b.Start.After(ev.At) {
					b.Outcome = ev.Event
					break
				}
			}
		}
	}
	for _, ep := range rep.Episodes {
		for _, r := range ep.Roots {
			for _, k := range r.Keys {
				for _, ln := range byKey[k] {
					for i := range ln.Bars {
						b := &ln.Bars[i]
						if !b.Wait && b.Who == r.Holder && !b.Start.After(ep.End) && !b.End.Before(ep.Start) {
							b.Root = true
						}
					}
				}
			}
		}
	}
}
