package ui

import (
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// details is the overlay for one lock: who holds or waits, the full
// query, the blocking chain and the key's whole queue. It shows the
// snapshot it was opened on, and says so, so that it holds still while
// read. It covers the body edge to edge and wraps between words.
type details struct {
	st    *Styles
	keys  *KeyMap
	box   scrollBox
	short []key.Binding
}

func newDetails(st *Styles, k *KeyMap, snap model.Snapshot, sel model.Lock, db string, beats []time.Time) *details {
	d := &details{st: st, keys: k, box: newScrollBox(st, k),
		short: []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Close, k.Quit}}
	title := Sanitize(sel.KeyLabel()) + " · " + holderWord(&sel) + " " + Sanitize(sel.Holder()) + " · as of " + snap.Taken.Format("15:04:05")
	d.box.set(title, func(w int) string { return describeLock(st, &snap, &sel, db, beats, w) })
	return d
}

// holderWord names what Holder returns: a pid, or an owner.
func holderWord(l *model.Lock) string {
	if l.PID != 0 {
		return "pid"
	}
	return "owner"
}

// SetSize sets the box's size (the body of the screen).
func (d *details) SetSize(w, h int) { d.box.SetSize(w, h) }

// View renders the box.
func (d *details) View() string { return d.box.View() }

// Place covers the body.
func (d *details) Place() placement { return placeBody }

// ShortHelp is the overlay's keys, for the footer.
func (d *details) ShortHelp() []key.Binding { return d.short }

// FullHelp is ShortHelp in one column.
func (d *details) FullHelp() [][]key.Binding { return [][]key.Binding{d.short} }

// Update scrolls, or closes on esc or enter.
func (d *details) Update(msg tea.Msg) (bool, tea.Cmd) {
	if k, ok := msg.(tea.KeyPressMsg); ok && (key.Matches(k, d.keys.Close) || key.Matches(k, d.keys.Details)) {
		return false, nil
	}
	return true, d.box.Update(msg)
}

// labelW is the width of the labels of describeLock's first lines.
const labelW = 10

// describeLock writes the details of sel in w cells a line, wrapped
// between words: a value that wraps goes on under its own start.
func describeLock(st *Styles, snap *model.Snapshot, sel *model.Lock, db string, beats []time.Time, w int) string {
	var b strings.Builder
	line := func(label, value string) {
		b.WriteString(st.Bold.Render(cell(label, labelW)))
		b.WriteString(hang(Sanitize(value), w-labelW, labelW))
		b.WriteByte('\n')
	}
	para := func(indent int, s string) {
		b.WriteString(spaces(indent))
		b.WriteString(hang(s, w-indent, indent+2))
		b.WriteByte('\n')
	}
	section := func(title string) {
		b.WriteString("\n")
		b.WriteString(st.Section.Render(title))
		b.WriteString("\n")
	}
	now := snap.Now(sel)
	where := kindName(sel.Kind) + " lock"
	if sel.Database != "" {
		where += " in database " + sel.Database
		if db != "" && sel.Database != db {
			where += " (not the monitored one: the same key there is another lock)"
		}
	}
	if sel.Server != "" {
		where += " on server " + sel.Server
	}
	if !sel.Kind.PG() && sel.Source < len(snap.Sources) && sel.Source > 0 {
		where += " · from " + snap.Sources[sel.Source].Name
	}
	line("key", sel.KeyLabel()+" · "+where)
	if !sel.Kind.PG() {
		line("registry", orDash(sel.Namespace))
	}
	if sel.Granted {
		line("state", heldState(sel, now))
	} else {
		line("state", "waits, #"+strconv.Itoa(sel.QueuePos)+" in queue, for "+fmtDur(sel.Waited(now))+
			" (since "+sel.WaitStart.Format("15:04:05.000")+")")
	}
	line("mode", orDash(sel.Mode))
	kindDetails(line, sel, now, beats)
	if sel.PID != 0 {
		backend := "pid " + strconv.Itoa(int(sel.PID)) + " · user " + orDash(sel.Session().User) +
			" · application " + orDash(sel.Session().ApplicationName)
		if sel.Session().ClientAddr != "" {
			backend += " · client " + sel.Session().ClientAddr
		}
		line("backend", backend)
		act := orDash(sel.Session().State)
		if !sel.Session().QueryStart.IsZero() {
			act += " · statement started " + sel.Session().QueryStart.Format("15:04:05") + " (" +
				fmtDur(snap.Taken.Sub(sel.Session().QueryStart)) + " before this snapshot)"
		}
		line("activity", act)

		section("Query")
		q := strings.TrimSpace(strings.ReplaceAll(sel.Session().Query, "\t", "    "))
		if q == "" {
			q = "(none visible)"
		}
		for _, ql := range strings.Split(q, "\n") {
			body := strings.TrimLeft(ql, " ")
			para(2+len(ql)-len(body), Sanitize(body))
		}
	}
	if sel.Kind == model.KindLease {
		section("Audit of " + Sanitize(sel.KeyLabel()))
		n := 0
		for _, a := range snap.Audit {
			if a.Name != sel.Name || a.Server != sel.Server {
				continue // another lease, or one of the same name on another target
			}
			n++
			s := a.At.Format("15:04:05") + " " + orDash(a.Actor) + ": " + orDash(a.Reason) + " · from " + orDash(a.VictimOwner)
			if a.VictimMode != "" {
				s += " (" + a.VictimMode + ", fence " + strconv.FormatInt(a.VictimFence, 10) + ")"
			}
			if a.Fence != 0 {
				s += " · new fence " + strconv.FormatInt(a.Fence, 10)
			}
			para(2, Sanitize(s))
		}
		if n == 0 {
			para(2, "(no recovery recorded)")
		}
	}

	section("Blocking chain")
	for _, cl := range blockingChain(snap, sel) {
		body := strings.TrimLeft(cl, " ")
		para(2+len(cl)-len(body), Sanitize(body))
	}

	section("Queue of " + Sanitize(sel.KeyLabel()))
	key := sel.KeyID()
	var queue []*model.Lock
	var names []string
	hw, mw, tw := 3, 4, 4 // the widest holder, mode and time, measured
	for i := range snap.Locks {
		l := &snap.Locks[i]
		if l.KeyID() != key {
			continue
		}
		queue = append(queue, l)
		names = append(names, Sanitize(l.Holder()))
		t, _ := lockTime(l, snap.Now(l))
		hw, mw, tw = max(hw, width(names[len(names)-1])), max(mw, width(modeText(l.Mode))), max(tw, width(t))
	}
	// Holders give up width first, elided where they are alike; a mode is
	// never cut.
	hw = min(hw, max(w/3, 8))
	for _, l := range queue {
		mark := "  "
		if idOf(l) == idOf(sel) {
			mark = "› "
		}
		state := "holds"
		if !l.Granted {
			state = "waits #" + strconv.Itoa(l.QueuePos)
		}
		t, _ := lockTime(l, snap.Now(l))
		row := mark + cell(state, 10) + " " + rcell(elide(Sanitize(l.Holder()), hw, names), hw) + "  " +
			cell(Sanitize(modeText(l.Mode)), mw) + " " + cell(t, tw) + " "
		who := l.Session().ApplicationName
		if l.PID == 0 && l.Token != "" {
			who = "token " + l.Token + "…"
		}
		b.WriteString(row + hang(Sanitize(who), w-width(row), width(row)))
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// hang wraps s at w cells between words (see wrap), and indents every
// line after the first by indent.
func hang(s string, w, indent int) string {
	if w < 8 {
		w = 8
	}
	lines := wrap(s, w)
	for i := 1; i < len(lines); i++ {
		lines[i] = spaces(indent) + lines[i]
	}
	return strings.Join(lines, "\n")
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// heldState is a holder's state line: how long it is known held, what
// its kind says of that, and an idle-in-transaction warning.
func heldState(sel *model.Lock, now time.Time) string {
	held := "held"
	switch {
	case !sel.Kind.PG() && !sel.HeldSince.IsZero():
		held = "held " + fmtDur(sel.Held(now)) + " (granted " + sel.HeldSince.Format("15:04:05") + ")"
	case !sel.HeldSince.IsZero():
		held = "held ≥" + fmtDur(sel.Held(now)) + " (known held since " + sel.HeldSince.Format("15:04:05") +
			"; the server does not record grant times)"
	}
	if tx := txAge(sel, now); tx != "" {
		held += " · in a transaction begun " + tx + " ago"
	}
	if idle := idleInTx(sel); idle != "" {
		held += " · " + idle + ": the session holds its locks while doing nothing"
	}
	return held
}

// kindDetails writes the lines only a kind has: the locked object of a
// PostgreSQL lock other than advisory; a Redis lock's owner, token, fence
// and TTL; a lease's owner, fence, lease, heartbeats and stale flag.
func kindDetails(line func(label, value string), sel *model.Lock, now time.Time, beats []time.Time) {
	switch sel.Kind {
	case model.KindAdvisory:
	case model.KindRedis, model.KindLease:
		line("owner", orDash(sel.Owner))
		if sel.Token != "" {
			line("token", sel.Token+"… (the first characters only)")
		}
		if sel.Granted {
			line("fence", strconv.FormatInt(sel.Fence, 10))
		}
		left := "ttl"
		if sel.Kind == model.KindLease {
			left = "lease"
		}
		switch {
		case sel.Expires.IsZero():
		case sel.Left(now) >= 0:
			line(left, fmtDur(sel.Left(now))+" left (until "+sel.Expires.Format("15:04:05.000")+")")
		default:
			line(left, "passed "+fmtDur(-sel.Left(now))+" ago ("+sel.Expires.Format("15:04:05.000")+")")
		}
		if sel.Kind != model.KindLease {
			return
		}
		if !sel.Heartbeat.IsZero() {
			hb := fmtDur(sel.HeartbeatAge(now)) + " ago (" + sel.Heartbeat.Format("15:04:05") + ")"
			if len(beats) > 1 {
				var past []string
				for i := len(beats) - 1; i >= 0 && len(past) < 6; i-- {
					past = append(past, beats[i].Format("15:04:05"))
				}
				hb += " · seen: " + strings.Join(past, " ")
			}
			line("heartbeat", hb)
		}
		if sel.Stale {
			line("stale", "yes: the lease passed, its heartbeat is older than its grace and no job claims it; a manager would recover it")
		}
	default:
		obj := sel.LockType
		if rel := sel.RelationLabel(); rel != "" {
			obj += " on " + rel
		}
		if sel.Row != "" {
			obj += " row " + sel.Row
		}
		if sel.Object != "" {
			obj += " " + sel.Object
		}
		line("object", obj)
	}
}
