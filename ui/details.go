package ui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/viewport"
	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// details is the overlay for one lock: who holds or waits, the full
// query, the blocking chain and the key's whole queue. It shows the
// snapshot it was opened on, and says so, so that it holds still while
// read.
type details struct {
	st    *Styles
	title string
	vp    viewport.Model
	w, h  int
}

func newDetails(st *Styles) details {
	vp := viewport.New()
	vp.SoftWrap = true
	vp.KeyMap.Left.SetEnabled(false)
	vp.KeyMap.Right.SetEnabled(false)
	return details{st: st, vp: vp}
}

// SetSize sets the overlay's outer size.
func (d *details) SetSize(w, h int) {
	d.w, d.h = w, h
	d.vp.SetWidth(max(w-4, 10)) // border and padding
	d.vp.SetHeight(max(h-4, 1)) // border, title, hint
}

// Open fills the overlay for lock sel of snap.
func (d *details) Open(snap *model.Snapshot, sel *model.Lock, db string) {
	d.title = Sanitize(sel.KeyLabel()) + " · pid " + Sanitize(sel.Holder()) + " · as of " + snap.Taken.Format("15:04:05")
	d.vp.SetContent(describeLock(d.st, snap, sel, db))
	d.vp.GotoTop()
}

// Update scrolls.
func (d *details) Update(msg tea.Msg) tea.Cmd {
	var cmd tea.Cmd
	d.vp, cmd = d.vp.Update(msg)
	return cmd
}

// View renders the box.
func (d *details) View() string {
	body := d.st.Section.Render(fitLine(d.title, d.w-4)) + "\n" + d.vp.View() + "\n" +
		d.st.Dim.Render(fitLine("↑/↓ pgup/pgdn scroll · esc close", d.w-4))
	return d.st.Box.Width(d.w).Height(d.h).Render(body)
}

// describeLock writes the details of sel.
func describeLock(st *Styles, snap *model.Snapshot, sel *model.Lock, db string) string {
	var b strings.Builder
	line := func(label, value string) {
		b.WriteString(st.Bold.Render(cell(label, 10)))
		b.WriteString(Sanitize(value))
		b.WriteByte('\n')
	}
	where := string(sel.Kind)
	if sel.Database != "" {
		where += " lock in database " + sel.Database
		if db != "" && sel.Database != db {
			where += " (not the monitored one: the same key there is another lock)"
		}
	}
	line("key", sel.KeyLabel()+" · "+where)
	if sel.Granted {
		held := "held"
		if !sel.HeldSince.IsZero() {
			held = "held ≥" + fmtDur(sel.Held) + " (known held since " + sel.HeldSince.Format("15:04:05") +
				"; the server does not record grant times)"
		}
		line("state", held)
	} else {
		line("state", "waits, #"+strconv.Itoa(sel.QueuePos)+" in queue, for "+fmtDur(sel.Waited)+
			" (since "+sel.WaitStart.Format("15:04:05.000")+")")
	}
	line("mode", sel.Mode)
	if sel.Kind != model.KindAdvisory {
		line("owner", sel.Owner)
		line("lease", fmtDur(sel.LeaseLeft)+" left")
	}
	if sel.PID != 0 {
		backend := "pid " + strconv.Itoa(int(sel.PID)) + " · user " + orDash(sel.User) +
			" · application " + orDash(sel.ApplicationName)
		if sel.ClientAddr != "" {
			backend += " · client " + sel.ClientAddr
		}
		line("backend", backend)
		act := orDash(sel.State)
		if !sel.QueryStart.IsZero() {
			act += " · statement started " + sel.QueryStart.Format("15:04:05") + " (" +
				fmtDur(snap.Taken.Sub(sel.QueryStart)) + " before this snapshot)"
		}
		line("activity", act)
	}

	b.WriteString("\n")
	b.WriteString(st.Section.Render("Query"))
	b.WriteString("\n")
	q := strings.TrimSpace(strings.ReplaceAll(sel.Query, "\t", "    "))
	if q == "" {
		q = "(none visible)"
	}
	for _, ql := range strings.Split(q, "\n") {
		b.WriteString("  ")
		b.WriteString(keepIndent(ql))
		b.WriteByte('\n')
	}

	b.WriteString("\n")
	b.WriteString(st.Section.Render("Blocking chain"))
	b.WriteString("\n")
	for _, cl := range blockingChain(snap, sel) {
		b.WriteString("  ")
		b.WriteString(keepIndent(cl))
		b.WriteByte('\n')
	}

	b.WriteString("\n")
	b.WriteString(st.Section.Render("Queue of " + Sanitize(sel.KeyLabel())))
	b.WriteString("\n")
	key := sel.KeyID()
	for i := range snap.Locks {
		l := &snap.Locks[i]
		if l.KeyID() != key {
			continue
		}
		mark := "  "
		if idOf(l) == idOf(sel) {
			mark = "› "
		}
		state := "holds"
		if !l.Granted {
			state = "waits #" + strconv.Itoa(l.QueuePos)
		}
		t, _ := lockTime(l)
		b.WriteString(mark + cell(state, 10) + " " + rcell(Sanitize(l.Holder()), 7) + "  " + cell(Sanitize(modeText(l.Mode)), 5) + " " +
			cell(t, 8) + " " + Sanitize(l.ApplicationName) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// keepIndent is sanitize for one line of a query shown whole: its
// indentation stays.
func keepIndent(s string) string {
	body := strings.TrimLeft(s, " ")
	return s[:len(s)-len(body)] + Sanitize(body)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

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
		if !ok {
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
		out = append(out, indent+strconv.Itoa(int(cur.PID))+" waits for "+cur.KeyLabel()+
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
