package incident

import (
	"cmp"
	"slices"
	"time"

	"github.com/locktop/locktop/model"
)

// episodeState is an open episode while frames are read.
type episodeState struct {
	e     Episode
	keys  map[*keyRef]bool
	kinds map[string]bool
	waits map[waitRef]time.Duration
	roots map[session]*rootState
	seen  bool // in the current frame
	fresh bool // began in the current frame (Episodes.Add tells it)
	// rank is its place among the open episodes while a frame is read:
	// an episode a component continues moves to the end.
	rank   int
	merged bool // joined another episode in the current frame
}

type rootState struct {
	r        Root
	server   string // the target it is on
	keys     map[*keyRef]bool
	last     time.Time
	longest  time.Duration // the longest wait behind it all along
	waitedOn map[waitRef]bool
	waited   time.Duration // the time waits spent behind it
}

// add takes one frame's waiting rows of the episode's component.
func (ep *episodeState) add(f *frame, rows []int32, t time.Time, s *model.Snapshot,
	waits map[waitRef]*waitInfo, holds map[holdRef]*Hold, holdWaiters map[holdRef]map[waitRef]bool, full bool) {
	if len(rows) > ep.e.PeakQueue {
		ep.e.PeakQueue, ep.e.PeakAt = len(rows), t
	}
	// Every row is of one component: a root's grants in it are the same
	// for each row it blocks, so they are scanned once (a holder of
	// 10,000 keys blocking 20 waiters is 10,000 grants, not 200,000).
	root := f.find(f.key[rows[0]].n)
	for _, j := range rows {
		l := &s.Locks[j]
		k := f.key[j]
		if !ep.keys[k] {
			ep.keys[k] = true
			ep.e.Keys = append(ep.e.Keys, l.ServerKeyLabel())
		}
		kind := string(l.Kind)
		if kind == "" {
			kind = string(model.KindAdvisory)
		}
		ep.kinds[kind] = true
		start := l.WaitStart
		if start.IsZero() {
			start = t
		}
		if ep.e.Start.IsZero() || start.Before(ep.e.Start) {
			ep.e.Start = start
		}
		id := waitRef{k, f.names[f.who[j]], start.UnixNano()}
		waited := max(l.Waited(s.Now(l)), t.Sub(start))
		ep.waits[id] = max(ep.waits[id], waited)
		w := waits[id]
		if w == nil {
			w = &waitInfo{first: l.Blockers()}
			if full {
				w.per = map[string]time.Duration{}
			}
			waits[id] = w
		}
		from := start
		if !w.last.IsZero() {
			from = w.last
		}
		delta := max(t.Sub(from), 0)
		w.waited, w.last = max(w.waited, waited), t
		for _, bn := range f.blockers(int(j)) {
			bs := f.names[bn]
			b := string(bs)
			if full {
				w.per[b] += delta
			}
			for _, g := range f.grantsOn(k.n) {
				if full && f.who[g] == bn {
					hk := holdRef{k, bs, s.Locks[g].HeldSince.UnixNano()}
					if holdWaiters[hk] == nil {
						holdWaiters[hk] = map[waitRef]bool{}
					}
					holdWaiters[hk][id] = true
				}
			}
			if f.waits[bn] {
				continue // waits itself: not the root of the chain
			}
			rs := ep.roots[bs]
			if rs == nil {
				rs = &rootState{r: Root{Holder: b}, server: l.Server, keys: map[*keyRef]bool{}, waitedOn: map[waitRef]bool{}}
				ep.roots[bs] = rs
			}
			rs.last = t
			if slices.Contains(w.first, b) {
				rs.longest = max(rs.longest, waited) // blocked by it all along
			}
			rs.waitedOn[id] = true
			rs.waited += delta
			if f.scanned[bn] == root+1 {
				continue // its grants in the component, seen for an earlier row
			}
			f.scanned[bn] = root + 1
			for _, gj := range f.grants[bn] {
				gk := f.key[gj]
				if f.find(gk.n) != root {
					continue // a key of its outside the episode
				}
				g := &s.Locks[gj]
				if rs.r.Application == "" {
					rs.r.Application = g.Session().ApplicationName
				}
				if !rs.keys[gk] {
					rs.keys[gk] = true
					rs.r.Keys = append(rs.r.Keys, g.ServerKeyLabel())
				}
				if !g.HeldSince.IsZero() && (rs.r.HeldSince.IsZero() || g.HeldSince.Before(rs.r.HeldSince)) {
					rs.r.HeldSince = g.HeldSince
				}
			}
		}
	}
}

// merge takes o, an open episode that has joined ep, into ep.
func (ep *episodeState) merge(o *episodeState) {
	if o.e.Start.Before(ep.e.Start) {
		ep.e.Start = o.e.Start
	}
	for _, k := range o.e.Keys {
		if !slices.Contains(ep.e.Keys, k) {
			ep.e.Keys = append(ep.e.Keys, k)
		}
	}
	for k := range o.keys {
		ep.keys[k] = true
	}
	for k := range o.kinds {
		ep.kinds[k] = true
	}
	for id, w := range o.waits {
		ep.waits[id] = max(ep.waits[id], w)
	}
	if o.e.PeakQueue > ep.e.PeakQueue {
		ep.e.PeakQueue, ep.e.PeakAt = o.e.PeakQueue, o.e.PeakAt
	}
	for s, r := range o.roots {
		if ep.roots[s] == nil {
			ep.roots[s] = r
		}
	}
}

// finish is the episode as reported.
func (ep *episodeState) finish() Episode {
	e := ep.e
	e.Duration = Seconds(max(e.End.Sub(e.Start), 0))
	for k := range ep.kinds {
		e.Kinds = append(e.Kinds, k)
	}
	slices.Sort(e.Kinds)
	for _, w := range ep.waits {
		e.Waits++
		e.Waited += Seconds(w)
	}
	for _, rs := range ep.roots {
		r := rs.r
		held := rs.longest
		if !r.HeldSince.IsZero() {
			held = max(held, rs.last.Sub(r.HeldSince))
		}
		r.Held = Seconds(held)
		r.Blocked = len(rs.waitedOn)
		r.Waited = Seconds(rs.waited)
		e.Roots = append(e.Roots, r)
	}
	slices.SortFunc(e.Roots, func(a, b Root) int {
		return cmp.Or(cmp.Compare(b.Held, a.Held), cmp.Compare(b.Waited, a.Waited), cmp.Compare(a.Holder, b.Holder))
	})
	return e
}
