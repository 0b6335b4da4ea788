package ui

import (
	"strconv"
	"strings"

	"github.com/locktop/locktop/model"
)

// maxChain bounds the blocking chain shown; a longer one is cut.
const maxChain = 12

// blockingChain follows who waits for whom from sel: for a waiter, the
// holder it waits for, what that holder waits for in turn, and so on; for a
// holder, the waiters it blocks and then the same walk from itself. A cycle
// is a deadlock, which PostgreSQL breaks by cancelling one wait.
func blockingChain(snap *model.Snapshot, sel *model.Lock) []string {
	if sel.PID == 0 {
		return ownerChain(snap, sel)
	}
	waiting := map[int32]*model.Lock{} // a backend waits for one lock at a time
	for i := range snap.Locks {
		if l := &snap.Locks[i]; !l.Granted && l.PID != 0 {
			waiting[l.PID] = l
		}
	}
	holder := func(key model.KeyID, pid int32) *model.Lock {
		for i := range snap.Locks {
			if l := &snap.Locks[i]; l.Granted && l.PID == pid && l.KeyID() == key {
				return l
			}
		}
		return nil
	}
	var out []string
	indent := ""
	cur := sel
	if sel.Granted {
		var blocked []string
		key := sel.KeyID()
		for i := range snap.Locks {
			l := &snap.Locks[i]
			if !l.Granted && l.KeyID() == key && containsPID(l.BlockedBy, sel.PID) {
				blocked = append(blocked, strconv.Itoa(int(l.PID))+" ("+fmtDur(l.Waited(snap.Now(l)))+")")
			}
		}
		if len(blocked) == 0 {
			out = append(out, sel.Holder()+" holds "+sel.KeyLabel()+" and blocks nobody")
		} else {
			out = append(out, sel.Holder()+" holds "+sel.KeyLabel()+" and blocks "+strconv.Itoa(len(blocked))+
				": "+strings.Join(blocked, ", "))
		}
		w, ok := waiting[sel.PID]
		if !ok || sel.PID == 0 {
			return out
		}
		out = append(out, "└ and itself waits:")
		indent = "  "
		cur = w
	}
	seen := map[int32]bool{cur.PID: true}
	for depth := 0; ; depth++ {
		if depth == maxChain {
			out = append(out, indent+"… (chain cut here)")
			return out
		}
		out = append(out, indent+cur.Holder()+" waits for "+cur.KeyLabel()+
			" (#"+strconv.Itoa(cur.QueuePos)+", "+fmtDur(cur.Waited(snap.Now(cur)))+")")
		if len(cur.BlockedBy) == 0 {
			out = append(out, indent+"└ blocked by nobody in this snapshot (about to be granted)")
			return out
		}
		next := cur.BlockedBy[0]
		more := ""
		if n := len(cur.BlockedBy) - 1; n > 0 {
			more = " and " + strconv.Itoa(n) + " more"
		}
		if h := holder(cur.KeyID(), next); h != nil {
			desc := "└ held by " + strconv.Itoa(int(next)) + more + " · " + orDash(Sanitize(h.Session().ApplicationName)) + " · " + orDash(h.Session().State)
			if !h.HeldSince.IsZero() {
				desc += " · held ≥" + fmtDur(h.Held(snap.Now(h)))
			}
			if tx := txAge(h, snap.Now(h)); tx != "" {
				desc += " · in tx " + tx
			}
			out = append(out, indent+desc)
		} else {
			out = append(out, indent+"└ queued behind "+strconv.Itoa(int(next))+more+", an earlier waiter in a conflicting mode")
		}
		if seen[next] {
			out = append(out, indent+"   ↻ back to "+strconv.Itoa(int(next))+": a deadlock; PostgreSQL cancels one of the waits")
			return out
		}
		seen[next] = true
		w, ok := waiting[next]
		if !ok {
			return out
		}
		indent += "  "
		cur = w
	}
}

func containsPID(pids []int32, pid int32) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// ownerChain is the chain of a Redis or lease lock, whose holders and
// waiters are owners, not backends: who holds the key, and who waits for
// it in which order. An owner waits for one key at a time only by
// convention, so the walk stops at the key.
func ownerChain(snap *model.Snapshot, sel *model.Lock) []string {
	key := sel.KeyID()
	var holders, waiters []string
	for i := range snap.Locks {
		l := &snap.Locks[i]
		if l.KeyID() != key {
			continue
		}
		if l.Granted {
			holders = append(holders, orDash(l.Owner))
		} else {
			waiters = append(waiters, orDash(l.Owner)+" ("+fmtDur(l.Waited(snap.Now(l)))+")")
		}
	}
	who := orDash(sel.Owner)
	if sel.Granted {
		if len(waiters) == 0 {
			return []string{who + " holds " + sel.KeyLabel() + " and blocks nobody"}
		}
		return []string{who + " holds " + sel.KeyLabel() + " and blocks " + strconv.Itoa(len(waiters)) + ": " + strings.Join(waiters, ", ")}
	}
	out := []string{who + " waits for " + sel.KeyLabel() + " (#" + strconv.Itoa(sel.QueuePos) + ", " + fmtDur(sel.Waited(snap.Now(sel))) + ")"}
	if b := sel.Blockers(); len(b) > 0 {
		return append(out, "└ held by "+strings.Join(b, ", "))
	}
	if len(holders) > 0 {
		return append(out, "└ held by "+strings.Join(holders, ", "))
	}
	return append(out, "└ blocked by nobody in this snapshot (about to be granted)")
}
