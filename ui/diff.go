package ui

import (
	"strconv"

	"github.com/locktop/locktop/model"
)

// maxDiffEvents caps the events one snapshot adds to the log; the rest are
// counted in a single line, so a churning server cannot flood the log.
const maxDiffEvents = 20

// diffEvents tells what changed between two snapshots, for the event log
// when no simulator reports events: new waits, grants (with how long they
// waited), releases, and waiters that left the queue (given up, or granted
// and released between two refreshes: the snapshots cannot tell which);
// a row whose session ended (next.Ended) ends as such, terminated or not.
//
// Both snapshots come grouped by key, so rows are matched key by key: one
// map lookup per key, then the few rows of that key, which keeps a refresh
// at 10,000 locks cheap.
//
// Most refreshes change few rows, and the rows that stay keep their place:
// the rows that match one for one from the start need no index at all.
func diffEvents(prev, next *model.Snapshot) []model.Event {
	seen := make([]bool, len(prev.Locks)) // prev rows still there
	same := 0
	for same < len(prev.Locks) && same < len(next.Locks) && sameRow(&prev.Locks[same], &next.Locks[same]) {
		seen[same] = true
		same++
	}
	var groups *groupIndex
	if same < len(next.Locks) {
		groups = indexGroups(prev.Locks)
	}
	var out []model.Event
	more := 0
	add := func(e model.Event) {
		if len(out) < maxDiffEvents {
			e.Time = next.Taken
			out = append(out, e)
			return
		}
		more++
	}
	forGroups(next.Locks[same:], func(start, end int) {
		start, end = start+same, end+same
		g := groups.find(&next.Locks[start]) // zero: a new key, no rows before
		rows := rowFinder(prev.Locks, g)
		for i := start; i < end; i++ {
			l := &next.Locks[i]
			if j := rows.find(l, l.Granted); j >= 0 {
				seen[j] = true
				continue
			}
			ev := model.Event{Worker: appLabel(l), Key: l.ServerKeyLabel(), PID: l.PID}
			switch {
			case !l.Granted:
				ev.Outcome = outcomeWaits
				ev.Detail = "#" + strconv.Itoa(l.QueuePos) + " in queue"
				if len(l.BlockedBy) > 0 {
					ev.Detail += ", behind " + strconv.Itoa(int(l.BlockedBy[0]))
				}
			default:
				ev.Outcome = model.OutcomeAcquired
				if j := rows.find(l, false); j >= 0 && !seen[j] {
					seen[j] = true
					ev.Outcome, ev.Wait = outcomeGranted, next.Taken.Sub(prev.Locks[j].WaitStart)
				}
			}
			add(ev)
		}
	})
	// The rows not seen again have gone.
	for i := range prev.Locks {
		if seen[i] {
			continue
		}
		l := &prev.Locks[i]
		ev := model.Event{Worker: appLabel(l), Key: l.ServerKeyLabel(), PID: l.PID}
		if e, ok := next.Ending(l.Server, strconv.Itoa(int(l.PID))); ok && l.PID != 0 {
			// Its session ended: not a release, not a wait given up.
			ev.Outcome, ev.Detail = outcomeEnded, e.Words()
			if l.Granted && !l.HeldSince.IsZero() {
				ev.Detail += " · held ≥" + fmtDur(next.Taken.Sub(l.HeldSince))
			}
		} else if l.Granted {
			ev.Outcome = outcomeReleased
			if !l.HeldSince.IsZero() {
				ev.Detail = "held ≥" + fmtDur(next.Taken.Sub(l.HeldSince))
			}
		} else {
			ev.Outcome = outcomeLeft
			ev.Wait = next.Taken.Sub(l.WaitStart)
			ev.Detail = "left the queue between refreshes"
		}
		add(ev)
	}
	if more > 0 {
		out = append(out, model.Event{Time: next.Taken, Worker: "locktop", Outcome: outcomeMore,
			Detail: "and " + fmtCount(int64(more)) + " more changes in this refresh"})
	}
	return out
}

// sameRow reports whether a and b are the same backend's (or owner's) row
// of the same key, granted or waiting alike: the same row a refresh later.
func sameRow(a, b *model.Lock) bool {
	return a.PID == b.PID && a.Granted == b.Granted && a.Owner == b.Owner && a.SameKey(b)
}

// forGroups calls fn for each run of rows with the same key.
func forGroups(locks []model.Lock, fn func(start, end int)) {
	for i := 0; i < len(locks); {
		j := i + 1
		for j < len(locks) && locks[j].SameKey(&locks[i]) {
			j++
		}
		fn(i, j)
		i = j
	}
}

// groupIndex finds a snapshot's key groups by key. It is keyed by the
// key's hint (model.KeyHint), which hashes faster than a whole KeyID, and
// chains the few groups that share one (the same id in another namespace
// or database). The entity id alone was not enough: every Redis key and
// lease has entity id 0, and one chain of thousands of them made the diff
// quadratic.
type groupIndex struct {
	locks []model.Lock
	first map[model.KeyHint]int32 // → its latest group in spans
	spans [][2]int
	next  []int32 // the next group with the same hint; -1 ends
}

func indexGroups(locks []model.Lock) *groupIndex {
	x := &groupIndex{locks: locks, first: make(map[model.KeyHint]int32, len(locks)/2+1)}
	forGroups(locks, func(start, end int) {
		i := int32(len(x.spans))
		x.spans = append(x.spans, [2]int{start, end})
		h := locks[start].KeyHint()
		prev, ok := x.first[h]
		if !ok {
			prev = -1
		}
		x.next = append(x.next, prev)
		x.first[h] = i
	})
	return x
}

// find returns the rows of l's key, or an empty span.
func (x *groupIndex) find(l *model.Lock) [2]int {
	i, ok := x.first[l.KeyHint()]
	if !ok {
		return [2]int{}
	}
	for ; i >= 0; i = x.next[i] {
		if s := x.spans[i]; x.locks[s[0]].SameKey(l) {
			return s
		}
	}
	return [2]int{}
}

// rowKey identifies a row within one key's rows.
type rowKey struct {
	pid     int32
	owner   string
	granted bool
}

// rowIndex looks up one key's rows, locks[g[0]:g[1]], by backend (or
// owner) and granted state. A long queue gets a map, so one hot key cannot
// make the diff quadratic.
type rowIndex struct {
	locks []model.Lock
	g     [2]int
	idx   map[rowKey]int
}

func rowFinder(locks []model.Lock, g [2]int) rowIndex {
	r := rowIndex{locks: locks, g: g}
	if g[1]-g[0] > 32 {
		r.idx = make(map[rowKey]int, g[1]-g[0])
		for j := g[0]; j < g[1]; j++ {
			p := &locks[j]
			r.idx[rowKey{p.PID, p.Owner, p.Granted}] = j
		}
	}
	return r
}

// find returns the index of l's backend's row with the given granted
// state, or -1.
func (r rowIndex) find(l *model.Lock, granted bool) int {
	if r.idx != nil {
		if j, ok := r.idx[rowKey{l.PID, l.Owner, granted}]; ok {
			return j
		}
		return -1
	}
	for j := r.g[0]; j < r.g[1]; j++ {
		p := &r.locks[j]
		if p.PID == l.PID && p.Granted == granted && p.Owner == l.Owner {
			return j
		}
	}
	return -1
}

func appLabel(l *model.Lock) string {
	if l.Session().ApplicationName != "" {
		return Sanitize(l.Session().ApplicationName)
	}
	if l.Owner != "" {
		return l.Owner
	}
	return "pid " + strconv.Itoa(int(l.PID))
}
