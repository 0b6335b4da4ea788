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

// ends marks how the holds and roots that s, taken at t, no longer shows
// ended: released, or their session ended (s.Ended).
func (x *Episodes) ends(s *model.Snapshot, t time.Time, shown map[holdRef]*Hold, full bool) {
	if full {
		x.endHolds(s, t, shown)
	}
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

// endHolds marks how the holds the last snapshot showed and s does not
// ended.
func (x *Episodes) endHolds(s *model.Snapshot, t time.Time, shown map[holdRef]*Hold) {
	open := make(map[holdRef]*Hold, len(shown))
	for k, h := range x.openHolds {
		if h.Until.Equal(t) {
			open[k] = h
		} else if h.Outcome == "" {
			h.Outcome, h.By = holdEnd(s, k.key.id.Server, h.Holder, k.key.id.Kind)
		}
	}
	maps.Copy(open, shown)
	x.openHolds = open
}

// Episodes follows contention episodes one snapshot at a time, as review
// does over a recording and as the live dashboard's event log does: Add
// tells which episodes a snapshot began and which it ended. Its zero value
// is not ready: use NewEpisodes.
type Episodes struct {
	open        []*episodeState
	closed      []*episodeState
	waits       map[waitRef]*waitInfo
	apps        map[session]string
	holds       map[holdRef]*Hold
	holdWaiters map[holdRef]map[waitRef]bool
	openHolds   map[holdRef]*Hold // the holds the last snapshot showed
	last        time.Time
	keys        map[model.KeyID]*keyRef
	gen         uint64 // the frames numbered so far
}

// NewEpisodes returns a tracker with no episode open.
func NewEpisodes() *Episodes {
	return &Episodes{waits: map[waitRef]*waitInfo{}, apps: map[session]string{}, holds: map[holdRef]*Hold{},
		holdWaiters: map[holdRef]map[waitRef]bool{}, keys: map[model.KeyID]*keyRef{}}
}

// Add takes the snapshot s, taken at t (a failed poll changes nothing):
// the episodes it began, as seen so far, and those it ended (their End is
// t), in order of their start. Ended episodes are not kept.
func (x *Episodes) Add(s model.Snapshot, t time.Time) (began, ended []Episode) {
	x.add(s, t, false)
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
		// The keys no wait, hold or open episode names any more go.
		for _, ep := range x.open {
			for k := range ep.keys {
				k.kept = x.gen
			}
		}
		for id, k := range x.keys {
			if k.gen != x.gen && k.kept != x.gen {
				delete(x.keys, id)
			}
		}
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

// add is Add, keeping the ended episodes in closed. With full it also
// follows what only a report needs: the holds and the waits queued behind
// each, each wait's time behind each blocker, the holders' applications.
// Live, the episodes are all that is asked for, and at 10,000 held locks
// the holds were most of the tracker's time.
func (x *Episodes) add(s model.Snapshot, t time.Time, full bool) {
	x.last = t
	if s.PollError() != "" {
		return // the outage is all it tells
	}
	open, closed, waits, apps, holds, holdWaiters := x.open, x.closed, x.waits, x.apps, x.holds, x.holdWaiters

	// The wait graph: keys and sessions, joined by every waiting row.
	f := x.frameOf(&s, full)
	shown := map[holdRef]*Hold{}
	var waiting []int32
	for j := range s.Locks {
		l := &s.Locks[j]
		if !l.Granted {
			waiting = append(waiting, int32(j))
			continue
		}
		if !full {
			continue
		}
		who := f.names[f.who[j]]
		if apps[who] == "" {
			apps[who] = l.Session().ApplicationName
		}
		hk := holdRef{f.key[j], who, l.HeldSince.UnixNano()}
		h := holds[hk]
		if h == nil {
			h = &Hold{Key: l.ServerKeyLabel(), Kind: string(l.Kind), Holder: string(who), Application: l.Session().ApplicationName, Since: l.HeldSince}
			if h.Since.IsZero() {
				h.Since = t
			}
			holds[hk] = h
		}
		h.Until, h.Held = t, Seconds(max(t.Sub(h.Since), 0))
		shown[hk] = h
	}
	comps := make(map[int32][]int32, len(waiting)/2) // a component's root node → its waiting rows
	first := make(map[int32]int64, len(waiting)/2)   // a component's earliest wait start
	for _, j := range waiting {
		root := f.find(f.key[j].n)
		comps[root] = append(comps[root], j)
		w := s.Locks[j].WaitStart.UnixNano()
		if m, ok := first[root]; !ok || w < m {
			first[root] = w
		}
	}
	// Which open episode each key belongs to: the open episodes' keys are
	// disjoint (a key is in one component per frame), so a component finds
	// the episodes it continues by its keys, not by comparing it with
	// every open episode (that was quadratic: at 10,000 locks in
	// thousands of queues, seconds per frame).
	byKey := map[*keyRef]*episodeState{}
	for i, ep := range open {
		ep.seen, ep.merged, ep.rank = false, false, i
		for k := range ep.keys {
			byKey[k] = ep
		}
	}
	next := len(open)
	// Components in order of their first wait, so that episodes open in a
	// stable order; each start is found once, not per comparison (that
	// was a tenth of the tracker at 2,500 queues).
	type comp struct {
		first int64
		root  int32
	}
	roots := make([]comp, 0, len(comps))
	for c := range comps {
		roots = append(roots, comp{first[c], c})
	}
	slices.SortFunc(roots, func(a, b comp) int { return cmp.Or(cmp.Compare(a.first, b.first), cmp.Compare(a.root, b.root)) })
	for _, c := range roots {
		rows := comps[c.root]
		var ks []*keyRef
		var cont []*episodeState // the open episodes this component continues; more than one have joined
		for _, j := range rows {
			k := f.key[j]
			if len(ks) > 0 && ks[len(ks)-1] == k {
				continue // the rows of a key come together; a repeat elsewhere is harmless
			}
			ks = append(ks, k)
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
			ep = &episodeState{keys: map[*keyRef]bool{}, kinds: map[string]bool{}, waits: map[waitRef]time.Duration{}, roots: map[session]*rootState{}, fresh: true}
			open = append(open, ep)
		}
		ep.rank, next = next, next+1
		ep.seen = true
		ep.add(f, rows, t, &s, waits, holds, holdWaiters, full)
		for _, k := range ks {
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
	x.ends(&s, t, shown, full)
}
