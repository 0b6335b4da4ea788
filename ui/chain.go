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
				blocked = append(blocked, strconv.Itoa(int(l.PID))+" ("+fmtDur(l.Waited)+")")
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
			" (#"+strconv.Itoa(cur.QueuePos)+", "+fmtDur(cur.Waited)+")")
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
			desc := "└ held by " + strconv.Itoa(int(next)) + more + " · " + orDash(Sanitize(h.ApplicationName)) + " · " + orDash(h.State)
			if !h.HeldSince.IsZero() {
				desc += " · held ≥" + fmtDur(h.Held)
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
