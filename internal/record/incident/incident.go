package incident

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/locktop/locktop/model"
)

// Top is how many keys, waits and holders a report lists.
const Top = 10

// Seconds is a duration that encodes in JSON as seconds.
type Seconds time.Duration

// MarshalJSON encodes s as a number of seconds.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(s).Seconds())
}

// Report is the review of a span of a recording.
type Report struct {
	Server    string    `json:"server"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Snapshots int       `json:"snapshots"`
	// Damaged counts the records of the whole file that could not be read.
	Damaged int `json:"damaged_records"`

	Keys     []KeyWait    `json:"keys"`
	Waits    []Wait       `json:"longest_waits"`
	Blockers []Blocker    `json:"blockers"`
	Queue    Queue        `json:"queue"`
	Leases   []LeaseEvent `json:"lease_events"`

	// Episodes are the contention episodes, in order of their start
	// (episode.go); Holders the holders others waited on longest in
	// total; LongestHolds the longest holds, with or without waiters;
	// Outages the spans a source answered with an error.
	Episodes     []Episode    `json:"episodes"`
	Holders      []HolderWait `json:"holders_by_time_waited_on"`
	LongestHolds []Hold       `json:"longest_holds"`
	Outages      []Outage     `json:"outages"`
	// Deadlocks are the cycles of waits seen in two consecutive snapshots
	// (deadlock.go), in the order they were found.
	Deadlocks []Deadlock `json:"deadlocks"`
}

// KeyWait is the waiting on one key.
type KeyWait struct {
	Key      string    `json:"key"`
	Kind     string    `json:"kind"`
	Waits    int       `json:"waits"`
	Total    Seconds   `json:"total_wait"`
	Longest  Seconds   `json:"longest_wait"`
	MaxQueue int       `json:"max_queue"`
	First    time.Time `json:"first_wait"`
	Last     time.Time `json:"last_wait"`
}

// Wait is one waiter's wait for one key, from when it began (the
// server's wait start) to the last snapshot that showed it.
type Wait struct {
	Key         string    `json:"key"`
	Kind        string    `json:"kind"`
	Waiter      string    `json:"waiter"` // a pid, or an owner
	Application string    `json:"application"`
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Waited      Seconds   `json:"waited"`
	// Behind names the holders it waited for.
	Behind []string `json:"behind"`
	// Outcome: "granted" (the next snapshot shows it holding the key, or
	// shows that every session it last waited behind had let go of the
	// key: the server grants the queue then, and shows no grant of a
	// relation, row or transaction no one waits for), "gone" (it left the
	// queue while what it waited behind still held on: it gave up, timed
	// out or was cancelled), "terminated" or "ended" (its session ended
	// while it waited: see model.SessionEnd), or "waiting" (still waiting
	// at the end).
	Outcome string `json:"outcome"`
	// By is who terminated it: "locktop" for this locktop's terminate
	// action; "" when not known.
	By string `json:"outcome_by,omitempty"`
}

// Blocker is a holder that had waiters queued behind it.
type Blocker struct {
	Key         string    `json:"key"`
	Kind        string    `json:"kind"`
	Holder      string    `json:"holder"`
	Application string    `json:"application"`
	Waiters     int       `json:"waiters"`
	Blocking    Seconds   `json:"blocking"` // how long it had at least one waiter
	MaxQueue    int       `json:"max_queue"`
	Start       time.Time `json:"start"` // its first snapshot with a waiter
	End         time.Time `json:"end"`   // its last
	// Outcome is how its hold ended (HoldOutcome): "released",
	// "terminated", "ended", "held" (still at the end), or a lease's event.
	Outcome string `json:"outcome,omitempty"`
	By      string `json:"outcome_by,omitempty"` // as Wait.By
}

// How a hold ends: the session let go of the lock and lives on
// (released), its session ended (model.EndTerminated or model.EndEnded),
// or it is still held at the end of the span. A lease's hold ends as its
// LeaseEvent says.
const (
	HoldReleased = "released"
	HoldHeld     = "held"
)

// holdEnd is how a hold of holder on server that snapshot s no longer
// shows ended: released, unless s says its session ended.
func holdEnd(s *model.Snapshot, server, holder string, kind model.Kind) (outcome, by string) {
	if e, ok := s.Ending(server, holder); ok {
		return e.Cause, e.By
	}
	if !kind.PG() && kind != "" {
		return "", "" // a Redis key or lease may have run out: its events say
	}
	return HoldReleased, ""
}

// Queue is the number of waiting rows over time.
type Queue struct {
	// Samples are the largest queue in each of Buckets equal spans of
	// From..To.
	Samples []int   `json:"samples"`
	Bucket  Seconds `json:"bucket"`
	// Gaps are the buckets in which no source answered (an outage) and
	// no snapshot showed the queue: unknown, not empty. Their Samples are 0.
	Gaps   []int     `json:"gaps,omitempty"`
	Peak   int       `json:"peak"`
	PeakAt time.Time `json:"peak_at"`
}

// LeaseEvent is the end of a lease other than its release.
type LeaseEvent struct {
	At     time.Time `json:"at"`
	Key    string    `json:"key"`
	Kind   string    `json:"kind"`
	Holder string    `json:"holder"`
	// Event: "expired" (the lease ran out), "recovered" (it ran out and
	// By took the key), "lost" (By took the key while the lease still
	// had time left).
	Event    string    `json:"event"`
	By       string    `json:"by,omitempty"`
	HeldFrom time.Time `json:"held_from"`
}

// Buckets is the number of queue samples, the sparkline's width.
const Buckets = 60

// Frames is what a report reads: the merged snapshot of every step.
type Frames interface {
	Len() int
	Time(i int) time.Time
	Merged(i int) (model.Snapshot, error)
}

type waitID struct {
	key   model.KeyID
	who   string
	start int64
}

type holdID struct {
	key model.KeyID
	who string
}

type holding struct {
	b         Blocker
	waiters   map[waitID]bool
	first     time.Time
	leased    bool
	leaseLeft time.Duration
	last      time.Time
	expired   bool      // an expiry already told
	blockedAt time.Time // the last snapshot it had a waiter in
}

// Build reviews the frames of f from from to to (zero: the whole span).
func Build(f Frames, server string, from, to time.Time) (*Report, error) {
	r := &Report{Server: server, From: from, To: to}
	lo, hi := 0, f.Len()
	for lo < hi && !from.IsZero() && f.Time(lo).Before(from) {
		lo++
	}
	for hi > lo && !to.IsZero() && f.Time(hi-1).After(to) {
		hi--
	}
	if lo < hi {
		if from.IsZero() {
			r.From = f.Time(lo)
		}
		if to.IsZero() {
			r.To = f.Time(hi - 1)
		}
	}
	r.Snapshots = hi - lo

	open := map[waitID]*Wait{}
	behind := map[waitID][]string{} // each open wait's blockers when last seen
	var done []*Wait
	var doneKeys []model.KeyID
	holds := map[holdID]*holding{}
	var blockers []Blocker
	keys := map[model.KeyID]*KeyWait{}
	var queue []sample

	var prevT time.Time
	ranOut := map[model.KeyID]LeaseEvent{} // leases that ran out, their key not taken since
	var dl deadlocks
	rv := newReviewer()
	for i := lo; i < hi; i++ {
		s, err := f.Merged(i)
		if err != nil {
			return nil, err
		}
		rv.add(r, s, f.Time(i))
		if s.PollError() != "" {
			// A failed poll ends no wait and no hold: an outage (episode.go),
			// and a time the queue is unknown.
			queue = append(queue, sample{f.Time(i), -1})
			continue
		}
		t := f.Time(i)
		dl.observe(t, &s)
		waiting := map[model.KeyID][]waitID{}
		holders := map[model.KeyID][]string{}
		seenW := map[waitID]bool{}
		present := map[model.KeyID]map[string]bool{} // who holds or waits, per key
		seenH := map[holdID]bool{}
		n := 0
		for j := range s.Locks {
			l := &s.Locks[j]
			k := l.KeyID()
			if present[k] == nil {
				present[k] = map[string]bool{}
			}
			present[k][l.Holder()] = true
			if l.Granted {
				holders[k] = append(holders[k], l.Holder())
				continue
			}
			n++
			start := l.WaitStart
			if start.IsZero() {
				start = t
			}
			id := waitID{k, l.Holder(), start.UnixNano()}
			seenW[id] = true
			waiting[k] = append(waiting[k], id)
			w := open[id]
			if w == nil {
				w = &Wait{Key: l.ServerKeyLabel(), Kind: string(l.Kind), Waiter: l.Holder(), Application: l.Session().ApplicationName, Start: start, Outcome: "waiting"}
				open[id] = w
			}
			w.End = t
			behind[id] = l.Blockers()
			w.Waited = Seconds(max(time.Duration(w.Waited), l.Waited(s.Now(l)), t.Sub(start)))
			for _, b := range l.BlockedBy {
				if h := itoa(b); !slices.Contains(w.Behind, h) {
					w.Behind = append(w.Behind, h)
				}
			}
		}
		queue = append(queue, sample{t, n})
		for id, w := range open {
			if seenW[id] {
				continue
			}
			w.Outcome = "gone"
			e, ended := s.Ending(id.key.Server, id.who)
			switch {
			case slices.Contains(holders[id.key], id.who):
				w.Outcome = "granted"
			case ended:
				w.Outcome, w.By = e.Cause, e.By // it did not give up
			case letGo(behind[id], present[id.key]):
				w.Outcome = "granted"
			}
			done, doneKeys = append(done, w), append(doneKeys, id.key)
			delete(open, id)
			delete(behind, id)
		}
		for k, ids := range waiting {
			kw := keys[k]
			if kw == nil {
				w := open[ids[0]]
				kw = &KeyWait{Key: w.Key, Kind: w.Kind, First: t}
				keys[k] = kw
			}
			kw.Last = t
			kw.MaxQueue = max(kw.MaxQueue, len(ids))
		}
		for j := range s.Locks {
			l := &s.Locks[j]
			if !l.Granted {
				continue
			}
			id := holdID{l.KeyID(), l.Holder()}
			seenH[id] = true
			h := holds[id]
			if h == nil {
				if e, ok := ranOut[id.key]; ok {
					// A new holder after a lease ran out: it recovered the key.
					r.Leases = append(r.Leases, LeaseEvent{At: t, Key: e.Key, Kind: e.Kind, Holder: e.Holder, Event: "recovered", By: l.Holder(), HeldFrom: e.HeldFrom})
					delete(ranOut, id.key)
				}
				h = &holding{b: Blocker{Key: l.ServerKeyLabel(), Kind: string(l.Kind), Holder: l.Holder(), Application: l.Session().ApplicationName}, waiters: map[waitID]bool{}, first: t}
				if !l.HeldSince.IsZero() {
					h.first = l.HeldSince
				}
				holds[id] = h
			}
			h.last = t
			left := l.Left(s.Now(l))
			if !l.Expires.IsZero() && left > 0 {
				h.leased = true
			}
			h.leaseLeft = left
			if h.leased && left <= 0 && !h.expired {
				h.expired = true
				r.Leases = append(r.Leases, LeaseEvent{At: t, Key: h.b.Key, Kind: h.b.Kind, Holder: h.b.Holder, Event: "expired", HeldFrom: h.first})
			}
			if ws := waiting[id.key]; len(ws) > 0 {
				if len(h.waiters) == 0 {
					h.b.Start = t
				}
				// Counted from snapshot to snapshot, as waits are: a
				// lower bound.
				if !h.blockedAt.IsZero() && h.blockedAt.Equal(prevT) {
					h.b.Blocking += Seconds(t.Sub(prevT))
				}
				h.blockedAt = t
				h.b.End = t
				h.b.MaxQueue = max(h.b.MaxQueue, len(ws))
				for _, w := range ws {
					h.waiters[w] = true
				}
			}
		}
		for id, h := range holds {
			if seenH[id] {
				continue
			}
			h.b.Outcome, h.b.By = holdEnd(&s, id.key.Server, id.who, id.key.Kind)
			if ev, ok := r.closeHolding(h, holders[id.key], prevT, t); ok {
				h.b.Outcome = ev.Event
				if ev.Event == "expired" {
					ranOut[id.key] = ev
				}
			}
			if len(h.waiters) > 0 {
				h.b.Waiters = len(h.waiters)
				blockers = append(blockers, h.b)
			}
			delete(holds, id)
		}
		prevT = t
	}
	for id, w := range open {
		done, doneKeys = append(done, w), append(doneKeys, id.key)
	}
	for _, h := range holds {
		if len(h.waiters) > 0 {
			h.b.Waiters = len(h.waiters)
			h.b.Outcome = HoldHeld
			blockers = append(blockers, h.b)
		}
	}

	for i, w := range done {
		if kw := keys[doneKeys[i]]; kw != nil {
			kw.Waits++
			kw.Total += w.Waited
			kw.Longest = max(kw.Longest, w.Waited)
		}
	}
	for _, kw := range keys {
		r.Keys = append(r.Keys, *kw)
	}
	slices.SortFunc(r.Keys, func(a, b KeyWait) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Kind, b.Kind))
	})
	r.Keys = r.Keys[:min(len(r.Keys), Top)]
	for _, w := range done {
		r.Waits = append(r.Waits, *w)
	}
	slices.SortFunc(r.Waits, func(a, b Wait) int {
		return cmp.Or(cmp.Compare(b.Waited, a.Waited), a.Start.Compare(b.Start), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Waiter, b.Waiter))
	})
	r.Waits = r.Waits[:min(len(r.Waits), Top)]
	slices.SortFunc(blockers, func(a, b Blocker) int {
		return cmp.Or(cmp.Compare(b.Waiters, a.Waiters), cmp.Compare(b.Blocking, a.Blocking), a.Start.Compare(b.Start), cmp.Compare(a.Key, b.Key))
	})
	r.Blockers = blockers[:min(len(blockers), Top)]
	slices.SortFunc(r.Leases, func(a, b LeaseEvent) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Holder, b.Holder))
	})

	r.Deadlocks = dl.all
	r.review(rv)

	// The queue, bucketed over the span.
	if len(queue) > 0 {
		r.Queue.bucket(queue, r.From, r.To)
	}
	return r, nil
}

// sample is the number of waiting rows a snapshot showed; -1 for a
// failed poll.
type sample struct {
	at time.Time
	n  int
}

// bucket fills in the queue from samples in time order over from..to: each
// bucket's largest queue; a bucket no snapshot fell in carries the queue
// the last one before it showed (the queue stood until the next poll), or
// is a gap when that was a failed poll, as is a bucket of failed polls.
func (q *Queue) bucket(samples []sample, from, to time.Time) {
	span := to.Sub(from)
	nb := min(Buckets, len(samples))
	q.Samples = make([]int, nb)
	q.Bucket = Seconds(span / time.Duration(nb))
	has := make([]bool, nb)   // a snapshot of locks fell in it
	tried := make([]bool, nb) // any poll fell in it
	last := make([]int, nb)   // the last sample in it
	for _, x := range samples {
		b := 0
		if span > 0 {
			b = min(max(int(int64(x.at.Sub(from))*int64(nb)/int64(span)), 0), nb-1)
		}
		tried[b], last[b] = true, x.n
		if x.n < 0 {
			continue
		}
		has[b] = true
		q.Samples[b] = max(q.Samples[b], x.n)
		if x.n > q.Peak {
			q.Peak, q.PeakAt = x.n, x.at
		}
	}
	before := 0 // the queue as the last poll before the bucket left it
	for b := range nb {
		switch {
		case has[b]:
		case !tried[b] && before >= 0:
			q.Samples[b] = before
		default:
			q.Gaps = append(q.Gaps, b)
		}
		if tried[b] {
			before = last[b]
		}
	}
}

// closeHolding tells how a lease ended when its holder is no longer
// shown: it ran out (and someone recovered the key), or someone took the
// key while it had time left; it returns the event, and false for a lock
// without a lease or a lease released in time.
func (r *Report) closeHolding(h *holding, now []string, lastSeen, t time.Time) (LeaseEvent, bool) {
	if !h.leased {
		return LeaseEvent{}, false
	}
	var by string
	for _, o := range now {
		if o != h.b.Holder {
			by = o
			break
		}
	}
	ranOut := h.expired || h.leaseLeft <= t.Sub(lastSeen)
	ev := LeaseEvent{At: t, Key: h.b.Key, Kind: h.b.Kind, Holder: h.b.Holder, By: by, HeldFrom: h.first}
	switch {
	case ranOut && by != "":
		ev.Event = "recovered"
	case ranOut:
		// Expired and not taken yet: the next holder recovers it.
		ev.Event = "expired"
		if h.expired {
			return ev, true // told when it reached zero
		}
		ev.At = lastSeen.Add(h.leaseLeft)
	case by != "":
		ev.Event = "lost"
	default:
		return LeaseEvent{}, false
	}
	r.Leases = append(r.Leases, ev)
	return ev, true
}

// letGo reports whether every session a waiter last waited behind is gone
// from its key's rows (present): the queue moved on, so the waiter was
// granted in the same interval in which it left.
func letGo(blockers []string, present map[string]bool) bool {
	if len(blockers) == 0 {
		return false
	}
	for _, b := range blockers {
		if present[b] {
			return false
		}
	}
	return true
}

func itoa(p int32) string { return strconv.Itoa(int(p)) }
