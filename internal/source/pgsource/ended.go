package pgsource

import (
	"cmp"
	"slices"

	"github.com/locktop/locktop/model"
)

// sessionState is what a Monitor remembers between polls to tell a
// session that let go of its locks from one that ended (Snapshot.Ended),
// and to say when the server proves it was terminated.
type sessionState struct {
	polled bool
	alive  map[int32]bool   // every client backend at the last poll
	locked map[int32]string // the backends that held or waited at the last poll, and their database
	killed int64            // the server's count of terminated sessions at the last poll
	// ours are the backends this monitor's Terminate ended and that the
	// server still listed then; guarded by Monitor.oursMu.
	ours map[int32]bool
}

// ended fills in snap.Ended: the backends that held or waited at the last
// poll and are not among alive now. Each is EndTerminated when this
// monitor terminated it, or when the server's count of terminated sessions
// (killed) rose by at least as many as the client backends that ended
// since the last poll, whichever they are, so that every one of them was
// terminated; else EndEnded, which claims nothing about why.
func (m *Monitor) ended(snap *model.Snapshot, alive []int32, killed int64) {
	st := &m.sessions
	now := make(map[int32]bool, len(alive))
	for _, p := range alive {
		now[p] = true
	}
	m.oursMu.Lock()
	ours := st.ours
	for p := range ours {
		if !now[p] && st.locked[p] == "" {
			delete(ours, p) // it ended holding nothing: nothing to tell
		}
	}
	if st.polled {
		gone := 0
		for p := range st.alive {
			if !now[p] {
				gone++
			}
		}
		for p := range st.locked {
			if !now[p] && !st.alive[p] {
				gone++ // it ended between the last poll's reads
			}
		}
		all := gone > 0 && killed-st.killed >= int64(gone)
		for p, db := range st.locked {
			if now[p] {
				continue
			}
			e := model.SessionEnd{PID: p, Database: db, Cause: model.EndEnded}
			if ours[p] {
				e.Cause, e.By = model.EndTerminated, model.ByLocktop
			} else if all {
				e.Cause = model.EndTerminated
			}
			delete(ours, p)
			snap.Ended = append(snap.Ended, e)
		}
		slices.SortFunc(snap.Ended, func(a, b model.SessionEnd) int { return cmp.Compare(a.PID, b.PID) })
	}
	m.oursMu.Unlock()
	locked := make(map[int32]string, len(st.locked))
	var last *model.Lock // the last row written: a run of one backend's rows in one database is one write
	for i := range snap.Locks {
		if l := &snap.Locks[i]; l.PID != 0 && l.Kind.PG() {
			if last == nil || l.PID != last.PID || l.Database != last.Database {
				locked[l.PID] = cmp.Or(l.Database, "-")
			}
			last = l
		}
	}
	st.polled, st.alive, st.locked, st.killed = true, now, locked, killed
}

// terminated notes that Terminate ended pid, so that its end is told as
// this locktop's doing.
func (m *Monitor) terminated(pid int32) {
	m.oursMu.Lock()
	defer m.oursMu.Unlock()
	if m.sessions.ours == nil {
		m.sessions.ours = map[int32]bool{}
	}
	m.sessions.ours[pid] = true
}
