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
// wait ends granted, given up, or still waiting.
const (
	Released  = "released"
	Held      = "held"
	Granted   = "granted"
	GaveUp    = "gave up"
	StillWait = "waiting"
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
// events and root blockers onto the bars.
func Build(f incident.Frames, rep *incident.Report) (*Timeline, error) {
	tl := &Timeline{From: rep.From, To: rep.To}
	lanes := map[laneID]*Lane{}
	holds := map[holdID]*Bar{}
	waits := map[waitID]*Bar{}
	lane := func(l *model.Lock) *Lane {
		k := l.KeyID()
		ln := lanes[k]
		if ln == nil {
			kind := string(l.Kind)
			if kind == "" {
				kind = string(model.KindAdvisory)
			}
			ln = &Lane{Key: l.KeyLabel(), Kind: kind}
			lanes[k] = ln
		}
		return ln
	}
	for i := range f.Len() {
		t := f.Time(i)
		if t.Before(rep.From) || t.After(rep.To) {
			continue
		}
		s, err := f.Merged(i)
		if err != nil {
			return nil, err
		}
		if s.PollError() != "" {
			continue // an outage ends no bar; the report marks it
		}
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
				holds[id] = &Bar{Who: l.Holder(), Application: l.ApplicationName, Query: l.Query, Mode: l.Mode,
					Start: since, End: t, Outcome: Held, Count: 1}
				lane(l)
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
			waits[id] = &Bar{Wait: true, Who: l.Holder(), Application: l.ApplicationName, Query: l.Query, Mode: l.Mode,
				Start: start, End: t, Outcome: StillWait, Count: 1}
			lane(l)
		}
		tl.Queue = append(tl.Queue, Point{t, n})
		for id, b := range holds {
			if !seenH[id] && b.Outcome == Held {
				b.Outcome = Released
			}
		}
		for id, b := range waits {
			if seenW[id] || b.Outcome != StillWait {
				continue
			}
			b.Outcome = GaveUp
			if slices.Contains(holding[id.key], id.who) {
				b.Outcome = Granted
			}
		}
		// Ended bars keep their outcome; a later snapshot showing the
		// same hold again (same grant time) is a new bar.
		for id, b := range holds {
			if !seenH[id] {
				lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
				delete(holds, id)
			}
		}
		for id, b := range waits {
			if !seenW[id] {
				lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
				delete(waits, id)
			}
		}
	}
	// Still held or waiting at the end: the lanes' sort orders them.
	for id, b := range holds {
		lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
	}
	for id, b := range waits {
		lanes[id.key].Bars = append(lanes[id.key].Bars, *b)
	}
	for _, ln := range lanes {
		slices.SortFunc(ln.Bars, func(a, b Bar) int {
			return cmp.Or(a.Start.Compare(b.Start), compareBool(a.Wait, b.Wait), cmp.Compare(a.Who, b.Who), a.End.Compare(b.End))
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
	return tl, nil
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

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
