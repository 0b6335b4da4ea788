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
