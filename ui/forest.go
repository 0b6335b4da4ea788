package ui

import (
	"slices"
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// forest is the overlay that draws the whole wait-for forest of a
// snapshot, across objects and kinds: each root blocker, costliest first,
// with everyone waiting behind it as a tree (a waiter under the session it
// waits for), then whoever waits in a cycle. Like the details it holds
// the snapshot it was opened on, and says so.
type forest struct {
	st    *Styles
	keys  *KeyMap
	box   scrollBox
	short []key.Binding
}

func newForest(st *Styles, k *KeyMap, snap model.Snapshot) *forest {
	f := &forest{st: st, keys: k, box: newScrollBox(st, k),
		short: []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Close, k.Quit}}
	g := waitfor.For(&snap)
	_, waiting := snap.Counts()
	title := "Wait-for forest · " + counted(len(g.Roots()), "root blocker", "root blockers") + " · " +
		fmtCount(int64(waiting)) + " waiting · as of " + snap.Taken.Format("15:04:05")
	f.box.set(title, func(w int) string { return drawForest(st, &snap, g, w) })
	return f
}

// SetSize sets the box's size (the body of the screen).
func (f *forest) SetSize(w, h int) { f.box.SetSize(w, h) }

// View renders the box.
func (f *forest) View() string { return f.box.View() }

// Place covers the body.
func (f *forest) Place() placement { return placeBody }

// ShortHelp is the overlay's keys, for the footer.
func (f *forest) ShortHelp() []key.Binding { return f.short }

// FullHelp is ShortHelp in one column.
func (f *forest) FullHelp() [][]key.Binding { return [][]key.Binding{f.short} }

// Update scrolls, or closes on esc or the key that opened it.
func (f *forest) Update(msg tea.Msg) (bool, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok && (key.Matches(k, f.keys.Close) || key.Matches(k, f.keys.Forest)) {
		return false, nil
	}
	return true, f.box.Update(msg)
}

// drawForest renders the forest of g in w cells a line.
func drawForest(st *Styles, snap *model.Snapshot, g *waitfor.Graph, w int) string {
	var b strings.Builder
	line := func(prefix, s string) {
		b.WriteString(prefix)
		b.WriteString(hang(s, w-width(prefix), width(prefix)+2))
		b.WriteByte('\n')
	}
	roots := g.Roots()
	if len(roots) == 0 && len(g.Stranded()) == 0 {
		return st.Dim.Render("Nobody waits for anybody in this snapshot.")
	}
	drawn := map[waitfor.Session]bool{}
	var walk func(x waitfor.Session, indent string)
	walk = func(x waitfor.Session, indent string) {
		ws := g.Waiters(x)
		for i, y := range ws {
			branch, next := "├─ ", "│  "
			if i == len(ws)-1 {
				branch, next = "└─ ", "   "
			}
			text := who(snap, g, y) + " waits " + waitFor(snap, g, y, x)
			if drawn[y] {
				line(indent+branch, text+" (and what waits behind it: see above)")
				continue
			}
			drawn[y] = true
			if others := len(g.Blockers(y)) - 1; others > 0 {
				text += " · also waits for " + strconv.Itoa(others) + " more"
			}
			line(indent+branch, text)
			walk(y, indent+next)
		}
	}
	for i, r := range roots {
		if i > 0 {
			b.WriteByte('\n')
		}
		cost := strconv.Itoa(r.Behind) + " wait behind it"
		if r.Direct != r.Behind {
			cost += " (" + strconv.Itoa(r.Direct) + " directly)"
		}
		cost += ", " + fmtDur(r.Waited) + " in all"
		b.WriteString(st.Root.Render("ROOT "))
		b.WriteString(hang(who(snap, g, r.Session)+" · holds "+heldText(snap, g, r.Session)+" · "+cost, w-5, 5))
		b.WriteByte('\n')
		drawn[r.Session] = true
		walk(r.Session, "  ")
	}
	if st := g.Stranded(); len(st) > 0 {
		if len(roots) > 0 {
			b.WriteByte('\n')
		}
		names := make([]string, len(st))
		for i, x := range st {
			names[i] = who(snap, g, x)
		}
		line("", "Waiting in a cycle, or behind one, with no root: "+strings.Join(names, ", ")+
			" (a deadlock: PostgreSQL cancels one of its own; across kinds nobody does)")
		cs := g.Cycles()
		for i := range cs {
			c := &cs[i]
			line("", "Cycle "+strconv.Itoa(i+1)+" · "+c.KindsLabel()+":")
			for _, e := range c.Edges {
				line("  ", Sanitize(c.Text(e)))
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// who names a session: its pid or owner, and its application when known.
func who(snap *model.Snapshot, g *waitfor.Graph, x waitfor.Session) string {
	s := x.Owner
	if x.PID != 0 {
		s = strconv.Itoa(int(x.PID))
	}
	s = Sanitize(s)
	rows := append(slices.Clone(g.Holds(x)), g.Waits(x)...)
	for _, i := range rows {
		if app := snap.Locks[i].Session().ApplicationName; app != "" {
			return s + " " + Sanitize(app)
		}
	}
	return s
}

// heldText lists what a root holds that others wait for: "public.accounts
// (AccessShare)".
func heldText(snap *model.Snapshot, g *waitfor.Graph, x waitfor.Session) string {
	var keys []string
	for _, i := range g.Holds(x) {
		l := &snap.Locks[i]
		s := Sanitize(l.KeyLabel()) + " (" + Sanitize(modeText(l.Mode)) + ")"
		if idle := idleInTx(l); idle != "" {
			s += " " + idle
		}
		if !slices.Contains(keys, s) {
			keys = append(keys, s)
		}
	}
	if len(keys) == 0 {
		return "what others wait for"
	}
	return strings.Join(keys, ", ")
}

// waitFor says how long y has waited for what, behind blocker:
// "40s for public.accounts (AccessExclusive)".
func waitFor(snap *model.Snapshot, g *waitfor.Graph, y, blocker waitfor.Session) string {
	rows := g.Waits(y)
	if len(rows) == 0 {
		return ""
	}
	l := &snap.Locks[rows[0]]
	for _, i := range rows {
		c := &snap.Locks[i]
		if (blocker.PID != 0 && slices.Contains(c.BlockedBy, blocker.PID)) || (blocker.PID == 0 && slices.Contains(c.BlockedByOwners, blocker.Owner)) {
			l = c
			break
		}
	}
	return fmtDur(l.Waited(snap.Now(l))) + " for " + Sanitize(l.KeyLabel()) + " (" + Sanitize(modeText(l.Mode)) + ")"
}
