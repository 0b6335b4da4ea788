package incident

import (
	"cmp"
	"slices"
	"time"

	"github.com/locktop/locktop/model"
)

// reviewer follows the episodes, the holders' waits, the holds and the
// outages frame by frame, fed by Build's one reading of the frames
// (decoding a frame is most of a report's cost: it is done once).
type reviewer struct {
	x       *Episodes
	outages map[string]*Outage
	last    time.Time
}

func newReviewer() *reviewer { return &reviewer{x: NewEpisodes(), outages: map[string]*Outage{}} }

// add takes the frame s, taken at t, a failed poll too.
func (v *reviewer) add(r *Report, s model.Snapshot, t time.Time) {
	v.last = t
	r.outagesAt(s, t, v.outages)
	v.x.add(s, t, true)
}

// review fills in, from what v followed, the episodes, the holders ranked
// by the time others waited on them, the longest holds and the outages.
func (r *Report) review(v *reviewer) {
	x, outages, last := v.x, v.outages, v.last
	open, closed, waits, apps, holds, holdWaiters := x.open, x.closed, x.waits, x.apps, x.holds, x.holdWaiters
	for _, ep := range open {
		ep.e.End, ep.e.Ongoing = last, true
		closed = append(closed, ep)
	}
	for _, o := range outages {
		o.To, o.Ongoing = last, true
		r.Outages = append(r.Outages, *o)
	}
	slices.SortFunc(r.Outages, func(a, b Outage) int { return cmp.Or(a.From.Compare(b.From), cmp.Compare(a.Source, b.Source)) })

	for _, ep := range closed {
		r.Episodes = append(r.Episodes, ep.finish())
	}
	slices.SortFunc(r.Episodes, func(a, b Episode) int { return a.Start.Compare(b.Start) })

	// Holders by the time others waited on them.
	ranked := map[session]*HolderWait{}
	for _, w := range waits {
		for b, d := range w.per {
			h := ranked[session(b)]
			if h == nil {
				h = &HolderWait{Holder: b, Application: apps[session(b)]}
				ranked[session(b)] = h
			}
			h.Waits++
			h.Waited += Seconds(d)
		}
	}
	for k, ws := range holdWaiters {
		h := holds[k]
		if h == nil {
			continue
		}
		h.Waiters = len(ws)
		if rh := ranked[session(h.Holder)]; rh != nil && !slices.Contains(rh.Keys, h.Key) {
			rh.Keys = append(rh.Keys, h.Key)
		}
	}
	for _, h := range ranked {
		slices.Sort(h.Keys)
		r.Holders = append(r.Holders, *h)
	}
	slices.SortFunc(r.Holders, func(a, b HolderWait) int {
		return cmp.Or(cmp.Compare(b.Waited, a.Waited), cmp.Compare(b.Waits, a.Waits), cmp.Compare(a.Holder, b.Holder))
	})
	r.Holders = r.Holders[:min(len(r.Holders), Top)]
	for _, h := range x.openHolds {
		h.Outcome = HoldHeld
	}
	for _, h := range holds {
		if h.Outcome == "" {
			h.Outcome = r.leaseEnd(h)
		}
		r.LongestHolds = append(r.LongestHolds, *h)
	}
	slices.SortFunc(r.LongestHolds, func(a, b Hold) int {
		return cmp.Or(cmp.Compare(b.Held, a.Held), a.Since.Compare(b.Since), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Holder, b.Holder))
	})
	r.LongestHolds = r.LongestHolds[:min(len(r.LongestHolds), Top)]
}

// leaseEnd is how a Redis key's or a lease's hold ended: the first lease
// event of its holder on its key from its grant on (expired, recovered,
// lost), else released.
func (r *Report) leaseEnd(h *Hold) string {
	for _, e := range r.Leases {
		if e.Key == h.Key && e.Kind == h.Kind && e.Holder == h.Holder && !e.At.Before(h.Since) {
			return e.Event
		}
	}
	return HoldReleased
}

// outagesAt opens and closes the outages a snapshot's sources show.
func (r *Report) outagesAt(s model.Snapshot, t time.Time, open map[string]*Outage) {
	failing := map[string]bool{}
	for _, src := range s.Sources {
		if src.Err == "" {
			continue
		}
		failing[src.Name] = true
		if open[src.Name] == nil {
			open[src.Name] = &Outage{Source: src.Name, From: t, Error: src.Err}
		}
	}
	for name, o := range open {
		if !failing[name] {
			o.To = t
			r.Outages = append(r.Outages, *o)
			delete(open, name)
		}
	}
}
