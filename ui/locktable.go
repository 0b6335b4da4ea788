package ui

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktop/locktop/model"
)

// sortMode orders the key groups of the lock table. Within a group the
// order is always the snapshot's: holders first, then waiters in queue
// order.
type sortMode int

const (
	sortKey   sortMode = iota // by key, as the snapshot has them
	sortWait                  // longest current wait first
	sortQueue                 // longest queue first
	sortHeld                  // longest held first
	numSorts
)

func (s sortMode) String() string {
	switch s {
	case sortWait:
		return "longest wait"
	case sortQueue:
		return "longest queue"
	case sortHeld:
		return "longest held"
	}
	return "key"
}

// rowID identifies a row across snapshots, so the selection stays on the
// same holder or waiter while the table changes under it.
type rowID struct {
	pid     int32
	owner   string
	key     model.KeyID
	granted bool
}

func idOf(l *model.Lock) rowID {
	return rowID{pid: l.PID, owner: l.Owner, key: l.KeyID(), granted: l.Granted}
}

// keyGroup is one key's rows: locks[start:end].
type keyGroup struct {
	start, end int
	waiters    int
	maxWait    time.Duration
	maxHeld    time.Duration
}

// tableRow is one displayed row: an index into the snapshot's locks and
// where it sits in its group (for the tree drawn in the key column).
type tableRow struct {
	lock  int
	first bool
	last  bool
}

// lockTable is the lock table: key groups (holder, then waiters in queue
// order), filtered and sorted, with a cursor. Only the rows that fit are
// ever rendered, so its cost per frame does not grow with the lock count.
type lockTable struct {
	st     *Styles
	width  int
	height int
	db     string // the monitored database: keys elsewhere say where they are

	locks  []model.Lock
	groups []keyGroup
	rows   []tableRow
	shown  int // groups after filtering

	held, waiting int
	sort          sortMode
	filter        filter
	paints        tablePaints
	cursor        int
	offset        int
	selected      rowID
	hasSelection  bool
}

// tablePaints are the table's styles as paints (see paint).
type tablePaints struct {
	key, tree, holds, waits, dim paint
	sev                          [3]paint // by severity
}

func newLockTable(st *Styles) lockTable {
	return lockTable{st: st, paints: tablePaints{
		key: paintOf(st.Key), tree: paintOf(st.Tree), holds: paintOf(st.Holds), waits: paintOf(st.Waits),
		dim: paintOf(st.Dim), sev: [3]paint{paintOf(st.TimeOK), paintOf(st.TimeWarn), paintOf(st.TimeCrit)},
	}}
}

// SetSize sets the cells the table may use, title and column titles
// included.
func (t *lockTable) SetSize(w, h int) {
	t.width, t.height = w, h
	t.scroll()
}

// SetLocks replaces the rows with a snapshot's, keeping the selection on the
// same row when it is still there.
func (t *lockTable) SetLocks(locks []model.Lock) {
	t.locks = locks
	t.held, t.waiting = 0, 0
	t.groups = t.groups[:0]
	for i := 0; i < len(locks); {
		g := keyGroup{start: i}
		for ; i < len(locks) && (i == g.start || sameKey(&locks[g.start], &locks[i])); i++ {
			l := &locks[i]
			if l.Granted {
				t.held++
				g.maxHeld = max(g.maxHeld, l.Held)
			} else {
				t.waiting++
				g.waiters++
				g.maxWait = max(g.maxWait, l.Waited)
			}
		}
		g.end = i
		t.groups = append(t.groups, g)
	}
	t.rebuild()
}

// SetFilter filters the table; "" shows everything.
func (t *lockTable) SetFilter(s string) {
	t.filter = parseFilter(s)
	t.rebuild()
}

// CycleSort moves to the next sort order.
func (t *lockTable) CycleSort() {
	t.sort = (t.sort + 1) % numSorts
	t.rebuild()
}

// rebuild recomputes the displayed rows from groups, filter and sort.
func (t *lockTable) rebuild() {
	order := make([]int, 0, len(t.groups))
	for gi, g := range t.groups {
		if t.filter.empty() || t.groupMatches(g) {
			order = append(order, gi)
		}
	}
	t.shown = len(order)
	if t.sort != sortKey {
		slices.SortStableFunc(order, func(a, b int) int {
			ga, gb := &t.groups[a], &t.groups[b]
			switch t.sort {
			case sortWait:
				return cmp.Compare(gb.maxWait, ga.maxWait)
			case sortQueue:
				return cmp.Compare(gb.waiters, ga.waiters)
			case sortHeld:
				return cmp.Compare(gb.maxHeld, ga.maxHeld)
			}
			return 0
		})
	}
	t.rows = t.rows[:0]
	for _, gi := range order {
		g := t.groups[gi]
		for i := g.start; i < g.end; i++ {
			t.rows = append(t.rows, tableRow{lock: i, first: i == g.start, last: i == g.end-1})
		}
	}
	// Keep the selection on the same row, else at the same place.
	if t.hasSelection {
		for i, r := range t.rows {
			if idOf(&t.locks[r.lock]) == t.selected {
				t.cursor = i
				break
			}
		}
	}
	t.clampCursor()
}

// groupMatches reports whether any row of g matches the filter: a filter
// keeps whole queues, since a waiter means little without its holder.
func (t *lockTable) groupMatches(g keyGroup) bool {
	for i := g.start; i < g.end; i++ {
		if t.filter.match(&t.locks[i]) {
			return true
		}
	}
	return false
}

func (t *lockTable) clampCursor() {
	t.cursor = min(max(t.cursor, 0), max(len(t.rows)-1, 0))
	if len(t.rows) > 0 {
		t.selected, t.hasSelection = idOf(&t.locks[t.rows[t.cursor].lock]), true
	}
	t.scroll()
}

// visible is how many rows fit under the title and the column titles.
func (t *lockTable) visible() int { return max(t.height-2, 0) }

// scroll moves the window so the cursor is in it.
func (t *lockTable) scroll() {
	vis := t.visible()
	if vis <= 0 {
		t.offset = 0
		return
	}
	if t.cursor < t.offset {
		t.offset = t.cursor
	}
	if t.cursor >= t.offset+vis {
		t.offset = t.cursor - vis + 1
	}
	t.offset = min(t.offset, max(len(t.rows)-vis, 0))
	t.offset = max(t.offset, 0)
}

// Move moves the cursor by n rows (negative is up).
func (t *lockTable) Move(n int) {
	t.cursor += n
	t.clampCursor()
}

// MoveTo puts the cursor on row i; -1 is the last row.
func (t *lockTable) MoveTo(i int) {
	if i < 0 {
		i = len(t.rows) - 1
	}
	t.cursor = i
	t.clampCursor()
}

// Selected returns the selected lock, if any.
func (t *lockTable) Selected() (*model.Lock, bool) {
	if len(t.rows) == 0 {
		return nil, false
	}
	return &t.locks[t.rows[t.cursor].lock], true
}

// Page is the number of rows a page key moves.
func (t *lockTable) Page() int { return max(t.visible()-1, 1) }

// column is one column of the table: its title, width, alignment and how
// a row fills it (text, and the style it is drawn in).
type column struct {
	title string
	width int
	right bool
	cell  func(t *lockTable, r tableRow, l *model.Lock) (string, paint)
}

const markW = 2 // "› " in front of the selected row

// columns lays the columns out in the table's width: the key, state, pid,
// time and blocker always; the mode from 100 cells (narrower, a share lock
// says "sh" in its state); then the application; then the user and the
// query in what is left.
func (t *lockTable) columns() []column {
	plain := paint{}
	p := &t.paints
	narrow := t.width < 100
	cols := []column{
		{title: "KEY", width: 20, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			switch {
			case r.first:
				s := l.KeyLabel()
				if l.Database != "" && t.db != "" && l.Database != t.db {
					s += " @" + l.Database
				}
				return Sanitize(s), p.key
			case r.last:
				return " └─", p.tree
			}
			return " ├─", p.tree
		}},
		{title: "STATE", width: 10, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			s, st := "holds", p.holds
			if !l.Granted {
				s, st = "waits #"+strconv.Itoa(l.QueuePos), p.waits
			}
			if narrow && l.Mode == model.ModeShare {
				s += " sh"
			}
			return s, st
		}},
		{title: "PID", width: 7, right: true, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Holder()), plain // a lease's owner comes from elsewhere
		}},
		{title: "APPLICATION", cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.ApplicationName), plain
		}},
	}
	if !narrow {
		cols = append(cols, column{title: "MODE", width: 5, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(modeText(l.Mode)), plain
		}})
	} else {
		cols[0].width, cols[1].width = 19, 11
	}
	cols = append(cols,
		column{title: "TIME", width: 8, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			s, sev := lockTime(l)
			if t.st.Marks && sev != sevNone {
				s += " " + sev.mark()
			}
			return s, p.sev[sev]
		}},
		column{title: "BLOCKED BY", width: 10, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return blockedText(l.BlockedBy, 10), plain
		}},
	)
	used := markW
	for _, c := range cols {
		used += c.width + 1
	}
	rest := t.width - used
	app := &cols[3]
	app.width = min(max(rest, 4), 22)
	rest -= app.width
	if rest >= 40 {
		cols = append(cols, column{title: "USER", width: 12, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.User), plain
		}})
		rest -= 13
	}
	if rest >= 13 {
		cols = append(cols, column{title: "QUERY", width: rest - 1, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Query), p.dim
		}})
	}
	return cols
}

// View renders the title, the column titles and the rows that fit.
func (t *lockTable) View() string {
	if t.width <= 0 || t.height <= 0 {
		return ""
	}
	lines := make([]string, 0, t.height)
	lines = append(lines, rule(t.st, "Locks", t.summary(), t.width))
	if t.height == 1 {
		return fitBlock(lines, t.width, t.height)
	}
	cols := t.columns()
	var head strings.Builder
	head.WriteString(strings.Repeat(" ", markW))
	for i, c := range cols {
		if i > 0 {
			head.WriteByte(' ')
		}
		head.WriteString(align(c.title, c.width, c.right))
	}
	lines = append(lines, t.st.ColHead.Render(fitLine(head.String(), t.width)))
	switch {
	case len(t.locks) == 0:
		lines = append(lines, "", t.st.Dim.Render("  No advisory locks are held or awaited right now."))
	case len(t.rows) == 0:
		lines = append(lines, "", t.st.Dim.Render("  No lock matches the filter "+strconv.Quote(t.filter.raw)+" (esc clears it)."))
	}
	end := min(t.offset+t.visible(), len(t.rows))
	for i := t.offset; i < end; i++ {
		lines = append(lines, t.renderRow(i, cols))
	}
	return fitBlock(lines, t.width, t.height)
}

func align(s string, w int, right bool) string {
	if right {
		return rcell(s, w)
	}
	return cell(s, w)
}

// summary is the text beside the title: counts, sort, filter.
func (t *lockTable) summary() string {
	var b strings.Builder
	b.WriteString(counted(len(t.groups), "key", "keys"))
	b.WriteString(" · ")
	b.WriteString(fmtCount(int64(t.held)))
	b.WriteString(" held · ")
	b.WriteString(fmtCount(int64(t.waiting)))
	b.WriteString(" waiting · sort: ")
	b.WriteString(t.sort.String())
	if !t.filter.empty() {
		b.WriteString(" · filter ")
		b.WriteString(strconv.Quote(t.filter.raw))
		b.WriteString(": ")
		b.WriteString(counted(t.shown, "key", "keys"))
	}
	if n := len(t.rows); n > t.visible() && t.visible() > 0 {
		b.WriteString(" · rows ")
		b.WriteString(strconv.Itoa(t.offset + 1))
		b.WriteString("–")
		b.WriteString(strconv.Itoa(min(t.offset+t.visible(), n)))
		b.WriteString(" of ")
		b.WriteString(fmtCount(int64(n)))
	}
	return b.String()
}

// renderRow renders row i. The selected row is drawn plain and reversed,
// so it reads the same with or without colour.
func (t *lockTable) renderRow(i int, cols []column) string {
	r := t.rows[i]
	l := &t.locks[r.lock]
	sel := i == t.cursor
	var b strings.Builder
	if sel {
		b.WriteString("› ")
	} else {
		b.WriteString("  ")
	}
	for ci, c := range cols {
		if ci > 0 {
			b.WriteByte(' ')
		}
		text, style := c.cell(t, r, l)
		text = align(text, c.width, c.right)
		if !sel {
			text = style.on(text)
		}
		b.WriteString(text)
	}
	if sel {
		return t.st.Selected.Render(fitLine(b.String(), t.width))
	}
	return b.String()
}

// severity grades a wait against the thresholds.
type severity int

const (
	sevNone severity = iota
	sevWarn
	sevCrit
)

func waitSeverity(d time.Duration) severity {
	switch {
	case d >= waitCrit:
		return sevCrit
	case d >= waitWarn:
		return sevWarn
	}
	return sevNone
}

// mark says without colour what the colour says.
func (s severity) mark() string {
	switch s {
	case sevWarn:
		return "!"
	case sevCrit:
		return "!!"
	}
	return ""
}

// lockTime is the time cell: how long a waiter has waited (graded), how
// long at least a holder has held (the server does not record grant times:
// see model.Lock.HeldSince), or the lease left.
func lockTime(l *model.Lock) (string, severity) {
	switch {
	case l.Kind == model.KindLeasePG || l.Kind == model.KindLeaseRedis:
		if l.Granted {
			return "lease " + fmtDur(l.LeaseLeft), sevNone
		}
		return fmtDur(l.Waited), waitSeverity(l.Waited)
	case !l.Granted:
		return fmtDur(l.Waited), waitSeverity(l.Waited)
	case l.HeldSince.IsZero():
		return "", sevNone
	}
	return "≥" + fmtDur(l.Held), sevNone
}

func modeText(mode string) string {
	switch mode {
	case model.ModeExclusive:
		return "excl"
	case model.ModeShare:
		return "share"
	}
	return strings.TrimSuffix(mode, "Lock")
}

// blockedText lists blocking pids in at most w cells: "4242", "4242,4243",
// "4242 +3".
func blockedText(pids []int32, w int) string {
	if len(pids) == 0 {
		return ""
	}
	s := strconv.Itoa(int(pids[0]))
	for i := 1; i < len(pids); i++ {
		next := s + "," + strconv.Itoa(int(pids[i]))
		if len(next) > w {
			return s + " +" + strconv.Itoa(len(pids)-i)
		}
		s = next
	}
	return s
}
