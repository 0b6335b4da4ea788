package incident

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/locktop/locktop/model"
)

// Episode is one contention episode: from the first wait on a set of
// connected keys to the first snapshot in which none of them is waited
// for. Two keys are connected when a session waits on one and holds or
// waits on the other, so a chain of waits (A waits for B, who waits for C)
// is one episode, not several. It is the unit of the report, and of the
// HTML report built on it.
type Episode struct {
	// Start is when its first wait began (the server's wait start, so it
	// can be before the first snapshot that showed it).
	Start time.Time `json:"start"`
	// End is the first snapshot in which no key of the episode was
	// waited for; the last snapshot reviewed when Ongoing.
	End     time.Time `json:"end"`
	Ongoing bool      `json:"ongoing"`
	// Duration is End less Start.
	Duration Seconds `json:"duration"`
	// Keys are the keys waited for, in the order their first wait was
	// seen; Kinds the kinds of lock among them.
	Keys  []string `json:"keys"`
	Kinds []string `json:"kinds"`
	// Roots are the holders at the head of the chains: they blocked a
	// waiter and waited for nothing themselves. Longest held first.
	Roots []Root `json:"root_blockers"`
	// PeakQueue is the most waiting rows at once, first seen at PeakAt.
	PeakQueue int       `json:"peak_queue"`
	PeakAt    time.Time `json:"peak_at"`
	// Waits counts the distinct waits; Waited is their total time (each
	// from its start to the last snapshot that showed it: a lower bound).
	Waits  int     `json:"waits"`
	Waited Seconds `json:"total_waited"`
}

// Root is a root blocker of an episode.
type Root struct {
	Holder      string `json:"holder"` // a pid, or an owner
	Application string `json:"application"`
	// Keys are the keys of the episode it held while others waited.
	Keys []string `json:"keys"`
	// HeldSince is the earliest grant of those keys the recording shows
	// (zero when none is known).
	HeldSince time.Time `json:"held_since,omitempty"`
	// Held is how long it held them, at least: from HeldSince to the last
	// snapshot that showed it blocking, and never less than the longest
	// wait behind it (a holder that blocked a waiter all along has held
	// at least that long, whatever the monitor saw of the grant).
	Held Seconds `json:"held"`
	// Blocked counts the waits queued behind it; Waited is the time they
	// spent behind it (a wait behind two holders at once counts for both).
	Blocked int     `json:"blocked"`
	Waited  Seconds `json:"waited_on_it"`
	// Ended is how its session ended while the episode lasted, if it did:
	// "terminated" or "ended" (model.SessionEnd); By as Wait.By.
	Ended string `json:"ended,omitempty"`
	By    string `json:"ended_by,omitempty"`
}

// HolderWait is a holder ranked by the total time others waited on it,
// over the whole span: each snapshot's time since the one before counts
// for the holders each waiter then waited behind (for both of two shared
// holders), so a waiter's wait moves on to the next holder as the first
// lets go.
type HolderWait struct {
	Holder      string   `json:"holder"`
	Application string   `json:"application"`
	Keys        []string `json:"keys"`
	Waits       int      `json:"waits"`
	Waited      Seconds  `json:"total_waited_on_it"`
}

// Hold is one holder's hold of one key, with or without waiters.
type Hold struct {
	Key         string    `json:"key"`
	Kind        string    `json:"kind"`
	Holder      string    `json:"holder"`
	Application string    `json:"application"`
	Since       time.Time `json:"since"` // the grant (HeldSince), else the first snapshot that showed it
	Until       time.Time `json:"until"` // the last snapshot that showed it
	Held        Seconds   `json:"held"`
	Waiters     int       `json:"waiters"` // distinct waits queued behind it
	// Outcome is how it ended, as Blocker.Outcome ("" for a Redis key or
	// a lease: the lease events say).
	Outcome string `json:"outcome,omitempty"`
	By      string `json:"outcome_by,omitempty"`
}

// Outage is a span in which a source answered with an error instead of
// its locks: a failed poll recorded as such (model.Outage), or a merged
// snapshot whose Sources say that source failed.
type Outage struct {
	Source  string    `json:"source"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"` // the first snapshot it answered again; the last reviewed when Ongoing
	Ongoing bool      `json:"ongoing"`
	Error   string    `json:"error"`
}

// session is a waiter or holder, a node of the wait graph beside the keys.
type session string

// episodeState is an open episode while frames are read.
type episodeState struct {
	e     Episode
	keys  map[model.KeyID]bool
	kinds map[string]bool
	waits map[waitID]time.Duration
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
	keys     map[model.KeyID]bool
	last     time.Time
	longest  time.Duration // the longest wait behind it all along
	waitedOn map[waitID]bool
	waited   time.Duration // the time waits spent behind it
}

// waitInfo is what the holders' ranking needs of a wait.
type waitInfo struct {
	waited time.Duration
	last   time.Time // the last snapshot that showed it
	first  []string  // its blockers when first seen
	// per is the time it waited behind each blocker: each snapshot's
	// time since the one before goes to the blockers it then shows.
	per map[string]time.Duration
}

type holdKey struct {
	key   model.KeyID
	who   string
	since int64
}

// ends marks how the holds and roots that s, taken at t, no longer shows
// ended: released, or their session ended (s.Ended).
func (x *Episodes) ends(s *model.Snapshot, t time.Time, shown map[holdKey]*Hold) {
	open := map[holdKey]*Hold{}
	for k, h := range x.openHolds {
		if h.Until.Equal(t) {
			open[k] = h
		} else if h.Outcome == "" {
			h.Outcome, h.By = holdEnd(s, k.key.Server, h.Holder, k.key.Kind)
		}
	}
	maps.Copy(open, shown)
	x.openHolds = open
	if len(s.Ended) == 0 {
		return
	}
	for _, ep := range append(x.open, x.closed...) {
		for _, rs := range ep.roots {
			if e, ok := s.Ending(rs.server, rs.r.Holder); ok && rs.r.Ended == "" {
				rs.r.Ended, rs.r.By = e.Cause, e.By
			}
		}
	}
}

// Episodes follows contention episodes one snapshot at a time, as review
// does over a recording and as the live dashboard's event log does: Add
// tells which episodes a snapshot began and which it ended. Its zero value
// is not ready: use NewEpisodes.
type Episodes struct {
	open        []*episodeState
	closed      []*episodeState
	waits       map[waitID]*waitInfo
	apps        map[session]string
	holds       map[holdKey]*Hold
	holdWaiters map[holdKey]map[waitID]bool
	openHolds   map[holdKey]*Hold // the holds the last snapshot showed
	last        time.Time
}

// NewEpisodes returns a tracker with no episode open.
func NewEpisodes() *Episodes {
	return &Episodes{waits: map[waitID]*waitInfo{}, apps: map[session]string{}, holds: map[holdKey]*Hold{}, holdWaiters: map[holdKey]map[waitID]bool{}}
}

// Add takes the snapshot s, taken at t (a failed poll changes nothing):
// the episodes it began, as seen so far, and those it ended (their End is
// t), in order of their start. Ended episodes are not kept.
func (x *Episodes) Add(s model.Snapshot, t time.Time) (began, ended []Episode) {
	x.add(s, t)
	if s.PollError() == "" {
		// Live, nothing but the open episodes is needed again: what this
		// snapshot no longer shows goes, so a dashboard left running for
		// days holds what is open now.
		for id, w := range x.waits {
			if !w.last.Equal(t) {
				delete(x.waits, id)
			}
		}
		for k, h := range x.holds {
			if !h.Until.Equal(t) {
				delete(x.holds, k)
				delete(x.holdWaiters, k)
			}
		}
		clear(x.apps)
	}
	for _, ep := range x.open {
		if ep.fresh {
			ep.fresh = false
			began = append(began, ep.finish())
		}
	}
	for _, ep := range x.closed {
		ended = append(ended, ep.finish())
	}
	x.closed = x.closed[:0]
	return began, ended
}

// add is Add, keeping the ended episodes in closed.
func (x *Episodes) add(s model.Snapshot, t time.Time) {
	x.last = t
	if s.PollError() != "" {
		return // the outage is all it tells
	}
	open, closed, waits, apps, holds, holdWaiters := x.open, x.closed, x.waits, x.apps, x.holds, x.holdWaiters

	// The wait graph: keys and sessions, joined by every waiting row.
	uf := unionFind{}
	grants := map[session][]*model.Lock{}
	shown := map[holdKey]*Hold{}
	var waiting []*model.Lock
	for j := range s.Locks {
		l := &s.Locks[j]
		who := session(l.Holder())
		if l.Granted {
			grants[who] = append(grants[who], l)
			if apps[who] == "" {
				apps[who] = l.ApplicationName
			}
			hk := holdKey{l.KeyID(), l.Holder(), l.HeldSince.UnixNano()}
			h := holds[hk]
			if h == nil {
				h = &Hold{Key: l.ServerKeyLabel(), Kind: string(l.Kind), Holder: l.Holder(), Application: l.ApplicationName, Since: l.HeldSince}
				if h.Since.IsZero() {
					h.Since = t
				}
				holds[hk] = h
			}
			h.Until, h.Held = t, Seconds(max(t.Sub(h.Since), 0))
			shown[hk] = h
			continue
		}
		waiting = append(waiting, l)
		uf.union(l.KeyID(), who)
		for _, b := range l.Blockers() {
			uf.union(l.KeyID(), session(b))
		}
	}
	comps := map[any][]*model.Lock{}
	for _, l := range waiting {
		root := uf.find(l.KeyID())
		comps[root] = append(comps[root], l)
	}
	// Which open episode each key belongs to: the open episodes' keys are
	// disjoint (a key is in one component per frame), so a component finds
	// the episodes it continues by its keys, not by comparing it with
	// every open episode (that was quadratic: at 10,000 locks in
	// thousands of queues, seconds per frame).
	byKey := map[model.KeyID]*episodeState{}
	for i, ep := range open {
		ep.seen, ep.merged, ep.rank = false, false, i
		for k := range ep.keys {
			byKey[k] = ep
		}
	}
	next := len(open)
	roots := slices.Collect(maps.Keys(comps))
	slices.SortFunc(roots, func(a, b any) int { return cmp.Compare(firstWait(comps[a]), firstWait(comps[b])) })
	for _, c := range roots {
		rows := comps[c]
		ks := map[model.KeyID]bool{}
		var cont []*episodeState // the open episodes this component continues; more than one have joined
		for _, l := range rows {
			k := l.KeyID()
			if ks[k] {
				continue
			}
			ks[k] = true
			if o := byKey[k]; o != nil && !slices.Contains(cont, o) {
				cont = append(cont, o)
			}
		}
		// The earliest of them in the open order takes the others in.
		slices.SortFunc(cont, func(a, b *episodeState) int { return cmp.Compare(a.rank, b.rank) })
		var ep *episodeState
		for _, o := range cont {
			if ep == nil {
				ep = o
				continue
			}
			ep.merge(o)
			o.merged = true
			for k := range o.keys {
				byKey[k] = ep
			}
		}
		if ep == nil {
			ep = &episodeState{keys: map[model.KeyID]bool{}, kinds: map[string]bool{}, waits: map[waitID]time.Duration{}, roots: map[session]*rootState{}, fresh: true}
			open = append(open, ep)
		}
		ep.rank, next = next, next+1
		ep.seen = true
		ep.add(rows, t, s, uf, grants, waits, holds, holdWaiters)
		for k := range ks {
			byKey[k] = ep
		}
	}
	open = slices.DeleteFunc(open, func(ep *episodeState) bool { return ep.merged })
	slices.SortStableFunc(open, func(a, b *episodeState) int { return cmp.Compare(a.rank, b.rank) })
	// Episodes with no waiter left end in this snapshot.
	rest := open[:0]
	for _, ep := range open {
		if ep.seen {
			rest = append(rest, ep)
			continue
		}
		ep.e.End = t
		closed = append(closed, ep)
	}
	x.open, x.closed = rest, closed
	x.ends(&s, t, shown)
}

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
	v.x.add(s, t)
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

// add takes one frame's waiting rows of the episode's component.
func (ep *episodeState) add(rows []*model.Lock, t time.Time, s model.Snapshot, uf unionFind, grants map[session][]*model.Lock,
	waits map[waitID]*waitInfo, holds map[holdKey]*Hold, holdWaiters map[holdKey]map[waitID]bool) {
	waiters := map[session]bool{}
	for _, l := range rows {
		waiters[session(l.Holder())] = true
	}
	if len(rows) > ep.e.PeakQueue {
		ep.e.PeakQueue, ep.e.PeakAt = len(rows), t
	}
	for _, l := range rows {
		k := l.KeyID()
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
		id := waitID{k, l.Holder(), start.UnixNano()}
		waited := max(l.Waited(s.Now(l)), t.Sub(start))
		ep.waits[id] = max(ep.waits[id], waited)
		w := waits[id]
		if w == nil {
			w = &waitInfo{first: l.Blockers(), per: map[string]time.Duration{}}
			waits[id] = w
		}
		from := start
		if !w.last.IsZero() {
			from = w.last
		}
		delta := max(t.Sub(from), 0)
		w.waited, w.last = max(w.waited, waited), t
		for _, b := range l.Blockers() {
			w.per[b] += delta
			bs := session(b)
			for _, g := range grants[bs] {
				if g.KeyID() == k {
					hk := holdKey{k, g.Holder(), g.HeldSince.UnixNano()}
					if holdWaiters[hk] == nil {
						holdWaiters[hk] = map[waitID]bool{}
					}
					holdWaiters[hk][id] = true
				}
			}
			if waiters[bs] {
				continue // waits itself: not the root of the chain
			}
			rs := ep.roots[bs]
			if rs == nil {
				rs = &rootState{r: Root{Holder: b}, server: l.Server, keys: map[model.KeyID]bool{}, waitedOn: map[waitID]bool{}}
				ep.roots[bs] = rs
			}
			rs.last = t
			if slices.Contains(w.first, b) {
				rs.longest = max(rs.longest, waited) // blocked by it all along
			}
			rs.waitedOn[id] = true
			rs.waited += delta
			for _, g := range grants[bs] {
				if uf.find(g.KeyID()) != uf.find(k) && g.KeyID() != k {
					continue // a key of its outside the episode
				}
				if rs.r.Application == "" {
					rs.r.Application = g.ApplicationName
				}
				if !rs.keys[g.KeyID()] {
					rs.keys[g.KeyID()] = true
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

// firstWait orders components by their earliest wait start, so that
// episodes are opened in a stable order.
func firstWait(rows []*model.Lock) int64 {
	m := int64(1<<63 - 1)
	for _, l := range rows {
		m = min(m, l.WaitStart.UnixNano())
	}
	return m
}

// unionFind joins keys and sessions into the wait graph's components.
type unionFind map[any]any

func (u unionFind) find(x any) any {
	for {
		p, ok := u[x]
		if !ok || p == x {
			return x
		}
		if g, ok := u[p]; ok && g != p {
			u[x] = g
		}
		x = p
	}
}

func (u unionFind) union(a, b any) {
	ra, rb := u.find(a), u.find(b)
	if ra != rb {
		u[ra] = rb
	}
}
