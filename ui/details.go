package ui

import (
	"strconv"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

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

func newDetails(st *Styles, k *KeyMap, snap model.Snapshot, sel model.Lock, db string) *details {
	d := &details{st: st, keys: k, box: newScrollBox(st, k),
		short: []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Close, k.Quit}}
	title := Sanitize(sel.KeyLabel()) + " · " + holderWord(&sel) + " " + Sanitize(sel.Holder()) + " · as of " + snap.Taken.Format("15:04:05")
	d.box.set(title, func(w int) string { return describeLock(st, &snap, &sel, db, w) })
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
func describeLock(st *Styles, snap *model.Snapshot, sel *model.Lock, db string, w int) string {
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
	where := kindName(sel.Kind) + " lock"
	if sel.Database != "" {
		where += " in database " + sel.Database
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
		if idle := idleInTx(sel); idle != "" {
			held += " · " + idle + ": the session holds its locks while doing nothing"
		}
		line("state", held)
	} else {
		line("state", "waits, #"+strconv.Itoa(sel.QueuePos)+" in queue, for "+fmtDur(sel.Waited)+
			" (since "+sel.WaitStart.Format("15:04:05.000")+")")
	}
	line("mode", sel.Mode)
	if sel.Owner != "" || sel.PID == 0 {
		line("owner", orDash(sel.Owner))
	}
	if sel.Kind != model.KindAdvisory {
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

	section("Query")
	q := strings.TrimSpace(strings.ReplaceAll(sel.Query, "\t", "    "))
	if q == "" {
		q = "(none visible)"
	}
	for _, ql := range strings.Split(q, "\n") {
		body := strings.TrimLeft(ql, " ")
		para(2+len(ql)-len(body), Sanitize(body))
	}

	section("Blocking chain")
	for _, cl := range blockingChain(snap, sel) {
		body := strings.TrimLeft(cl, " ")
		para(2+len(cl)-len(body), Sanitize(body))
	}

	section("Queue of " + Sanitize(sel.KeyLabel()))
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
		row := mark + cell(state, 10) + " " + rcell(Sanitize(l.Holder()), 7) + "  " + cell(Sanitize(modeText(l.Mode)), 5) + " " + cell(t, 8) + " "
		b.WriteString(row + hang(Sanitize(l.ApplicationName), w-ansi.StringWidth(row), ansi.StringWidth(row)))
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
