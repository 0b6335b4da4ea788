package ui

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// sortMode orders the key groups of the lock table. Within a group the
// order is always the snapshot's: holders first, then waiters in queue
// order.
type sortMode int

const (
	sortRoots sortMode = iota // the costliest root blocker's keys first, then by key
	sortKey                   // by key, as the sources have them
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
	case sortRoots:
		return "root blockers"
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

// tableRow is one displayed row: an index into the locks and where it sits
// in its group (for the tree drawn in the key column).
type tableRow struct {
	lock  int
	first bool
	last  bool
}

// lockTable is the lock table, every kind of lock in it: key groups
// (holder, then waiters in queue order), filtered and sorted, with a
// cursor. Only the rows that fit are ever rendered, and its columns are
// measured on those rows, so its cost per frame does not grow with the
// lock count.
type lockTable struct {
	st     *Styles
	keys   *KeyMap
	width  int
	height int
	db     string // the monitored database: keys elsewhere say where they are

	snap   *model.Snapshot // whose Locks the table shows; its clocks time them
	graph  *waitfor.Graph  // who waits for whom in snap
	locks  []model.Lock
	groups []keyGroup
	rows   []tableRow
	shown  int // groups after filtering
	kinds  int // distinct kinds among the locks: more than one shows KIND
	// servers: a lock carries its target's name (several targets): SERVER
	// is shown.
	servers bool

	held, waiting int
	sort          sortMode
	filter        filter
	paints        tablePaints
	cursor        int
	offset        int
	selected      rowID
	hasSelection  bool

	// shape is the columns on screen, held still (settle) while the
	// content would have them come and go.
	shape    tableShape
	hasShape bool
	want     tableShape // what the content wants, since wantSince
	since    time.Time
	reshape  bool // the operator filtered, sorted or moved: lay out at once

	// laid is the layout settle made in the shape it chose, which View
	// draws: the rows are laid out once a refresh, not once to choose
	// the shape and again to draw (issue 26: the second was about an
	// eighth of Update and View at rest). laidOK says it still stands:
	// every change to what it was measured on (the snapshot, the rows,
	// the window, the size) goes through scroll, which drops it;
	// laidMarks is the styles' Marks it was measured with (the TIME
	// column's width).
	laid      tableLayout
	laidOK    bool
	laidMarks bool
	// layouts counts the layouts made, for the tests.
	layouts int
}

// settle lays the table out for what the content wants now: more room
// (a wider cell, a column that appears, short names) at once, so that
// nothing is cut; less room (a column that empties, a narrower cell) only
// once the content has wanted it for settle, so that the columns never
// come and go with the content from one refresh to the next. fresh takes
// the content's shape at once (a resize, the operator's own move).
func (t *lockTable) settle(now time.Time, fresh bool) {
	if t.width <= 0 || t.height <= 1 {
		return
	}
	lay := t.layoutFor(nil)
	want := shapeOf(&lay)
	if want != t.want {
		t.want, t.since = want, now
	}
	switch {
	case fresh || t.reshape || !t.hasShape || !t.shape.rows || now.Sub(t.since) >= settle:
		t.shape = want
	default:
		t.shape = t.shape.grow(&want)
	}
	t.hasShape, t.reshape = true, false
	// In the shape the content wants, the layout drawn is the one just
	// made (layoutFor in a shape taken from a layout gives that layout
	// back); in a held shape it is laid out again, once.
	if t.shape.rows && t.shape != want {
		lay = t.layoutFor(&t.shape)
	}
	t.laid, t.laidOK, t.laidMarks = lay, true, t.st.Marks
}

// tablePaints are the table's styles as paints (see paint).
type tablePaints struct {
	key, tree, holds, waits, idle, dim, root paint
	sev                                      [3]paint // by severity
}

func newLockTable(st *Styles, k *KeyMap) lockTable {
	return lockTable{st: st, keys: k, paints: tablePaints{
		key: paintOf(st.Key), tree: paintOf(st.Tree), holds: paintOf(st.Holds), waits: paintOf(st.Waits),
		idle: paintOf(st.IdleTx), dim: paintOf(st.Dim), root: paintOf(st.Root),
		sev: [3]paint{paintOf(st.TimeOK), paintOf(st.TimeWarn), paintOf(st.TimeCrit)},
	}}
}

// SetSize sets the cells the table may use, title and column titles
// included.
func (t *lockTable) SetSize(w, h int) {
	t.width, t.height = w, h
	t.scroll()
}

// ShortHelp is the table's most used keys.
func (t *lockTable) ShortHelp() []key.Binding {
	k := t.keys
	return []key.Binding{k.Filter, k.Sort, k.Details}
}

// FullHelp is every key of the table, in one column.
func (t *lockTable) FullHelp() [][]key.Binding {
	k := t.keys
	return [][]key.Binding{
		{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Details, k.Forest, k.Deadlocks},
		{k.Filter, with(k.Close, "clear filter"), k.Sort, k.Terminate},
	}
}

// onKey moves the cursor, sorts, or clears the filter. It reports whether
// the key was the table's, and what to say about it.
func (t *lockTable) onKey(msg tea.KeyPressMsg) (handled bool, status string) {
	k := t.keys
	switch {
	case key.Matches(msg, k.Up):
		t.Move(-1)
	case key.Matches(msg, k.Down):
		t.Move(1)
	case key.Matches(msg, k.PageUp):
		t.Move(-t.Page())
	case key.Matches(msg, k.PageDown):
		t.Move(t.Page())
	case key.Matches(msg, k.Top):
		t.MoveTo(0)
	case key.Matches(msg, k.Bottom):
		t.MoveTo(-1)
	case key.Matches(msg, k.Sort):
		t.CycleSort()
		return true, "sorted by " + t.sort.String()
	case key.Matches(msg, k.Close):
		if !t.filter.empty() {
			t.SetFilter("")
			return true, "filter cleared"
		}
	default:
		return false, ""
	}
	return true, ""
}

// SetLocks replaces the rows with locks timed at taken (a snapshot of one
// source); see SetSnapshot.
func (t *lockTable) SetLocks(locks []model.Lock, taken time.Time) {
	t.SetSnapshot(&model.Snapshot{Taken: taken, Locks: locks})
}

// now is the time l's durations are measured at.
func (t *lockTable) now(l *model.Lock) time.Time {
	if t.snap == nil {
		return time.Time{}
	}
	return t.snap.Now(l)
}

// SetSnapshot replaces the rows with s's locks, keeping the selection on
// the same row when it is still there. The rows of one key must be
// together, holders first. s is kept: do not modify it.
func (t *lockTable) SetSnapshot(s *model.Snapshot) {
	t.snap = s
	t.graph = waitfor.For(s)
	locks := s.Locks
	t.locks = locks
	t.held, t.waiting, t.kinds = 0, 0, 0
	t.servers = len(locks) > 0 && locks[0].Server != ""
	t.groups = t.groups[:0]
	var kinds [4]model.Kind // the first few distinct kinds; more than one is all that matters
	for i := 0; i < len(locks); {
		g := keyGroup{start: i}
		if t.kinds < len(kinds) && !slices.Contains(kinds[:t.kinds], locks[i].Kind) {
			kinds[t.kinds] = locks[i].Kind
			t.kinds++
		}
		for ; i < len(locks) && (i == g.start || locks[i].SameKey(&locks[g.start])); i++ {
			l := &locks[i]
			if l.Granted {
				t.held++
				g.maxHeld = max(g.maxHeld, l.Held(t.now(l)))
			} else {
				t.waiting++
				g.waiters++
				g.maxWait = max(g.maxWait, l.Waited(t.now(l)))
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
	t.reshape = true
	t.rebuild()
}

// CycleSort moves to the next sort order.
func (t *lockTable) CycleSort() {
	t.sort = (t.sort + 1) % numSorts
	t.reshape = true
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
	if t.sort == sortRoots && t.waiting > 0 {
		// The tree of the costliest root first, its keys from the root
		// down; keys nobody waits behind last, by key.
		type rank struct{ root, depth int }
		ranks := make([]rank, len(t.groups))
		var last waitfor.Session // the session ranked last: a holder's rows often follow each other
		var lastRank rank
		lastOK, haveLast := false, false
		for _, gi := range order {
			ranks[gi] = rank{math.MaxInt, 0}
			g := t.groups[gi]
			for i := g.start; i < g.end; i++ {
				if l := &t.locks[i]; l.Granted {
					if x := waitfor.Of(l); !haveLast || x != last {
						r, d, ok := t.graph.Rank(x)
						last, lastRank, lastOK, haveLast = x, rank{r, d}, ok, true
					}
					if lastOK && lastRank.root < ranks[gi].root {
						ranks[gi] = lastRank
					}
				}
			}
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Or(cmp.Compare(ranks[a].root, ranks[b].root), cmp.Compare(ranks[a].depth, ranks[b].depth))
		})
	} else if t.sort != sortKey && t.sort != sortRoots {
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
			if l := &t.locks[r.lock]; l.PID == t.selected.pid && idOf(l) == t.selected {
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

// tall is the lines the table needs to show every row: its title, the
// column titles and the rows (or the line that says there are none).
func (t *lockTable) tall() int { return 2 + max(len(t.rows), 2) }

// visible is how many rows fit under the title and the column titles.
func (t *lockTable) visible() int { return max(t.height-2, 0) }

// scroll moves the window so the cursor is in it.
func (t *lockTable) scroll() {
	t.laidOK = false
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
	t.reshape = true
	t.clampCursor()
}

// MoveTo puts the cursor on row i; -1 is the last row.
func (t *lockTable) MoveTo(i int) {
	if i < 0 {
		i = len(t.rows) - 1
	}
	t.cursor = i
	t.reshape = true
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

// View renders the title, the column titles and the rows that fit.
func (t *lockTable) View() string {
	if t.width <= 0 || t.height <= 0 {
		return ""
	}
	lines := make([]string, 0, t.height)
	lines = append(lines, rule(t.st, "Locks", t.summary(t.width-len("Locks ")-2), t.width))
	if t.height == 1 {
		return fitBlock(lines, t.width, t.height)
	}
	lay := t.layout()
	lines = append(lines, t.st.ColHead.Render(fitLine(lay.head(), t.width)))
	switch {
	case len(t.locks) == 0:
		lines = append(lines, "", t.st.Dim.Render("  No locks are held or awaited right now."))
	case len(t.rows) == 0:
		lines = append(lines, "", t.st.Dim.Render("  No lock matches the filter "+strconv.Quote(t.filter.raw)+
			" ("+hint(t.keys.Close)+" clears it)."))
	}
	for i := range lay.rows {
		lines = append(lines, t.renderRow(&lay, i))
	}
	return fitBlock(lines, t.width, t.height)
}

// summary is the text beside the title in at most w cells: the filter and
// its match count first, then the counts, the rows shown and the sort; the
// least needed go when it is narrow.
func (t *lockTable) summary(w int) string {
	var segs []segment
	keys := counted(len(t.groups), "key", "keys")
	held, waiting := t.held, t.waiting
	if !t.filter.empty() {
		keys = "filter " + t.filter.describe() + ": " + counted(t.shown, "key", "keys") + " of " + fmtCount(int64(len(t.groups)))
		held, waiting = 0, 0 // of what the filter keeps
		for _, r := range t.rows {
			if t.locks[r.lock].Granted {
				held++
			} else {
				waiting++
			}
		}
	}
	segs = append(segs, segment{keys + " · " + fmtCount(int64(held)) + " held · " + fmtCount(int64(waiting)) + " waiting", 0})
	if n := len(t.rows); n > t.visible() && t.visible() > 0 {
		segs = append(segs, segment{"rows " + strconv.Itoa(t.offset+1) + "–" + strconv.Itoa(min(t.offset+t.visible(), n)) +
			" of " + fmtCount(int64(n)), 1})
	}
	drop := 2
	if t.sort != sortKey {
		drop = 1 // a sort chosen is worth saying
	}
	segs = append(segs, segment{"sort: " + t.sort.String(), drop})
	return fitSegments(segs, " · ", w)
}

// renderRow renders row i of lay. The selected row is drawn plain and
// reversed, so it reads the same with or without colour.
func (t *lockTable) renderRow(lay *tableLayout, i int) string {
	sel := lay.first+i == t.cursor
	var b strings.Builder
	if sel {
		b.WriteString("› ")
	} else {
		b.WriteString("  ")
	}
	for ci, c := range lay.cols {
		if ci > 0 {
			b.WriteByte(' ')
		}
		cl := &lay.rows[i][ci]
		text := cl.text
		switch {
		case width(text) <= c.width:
		case c.shrink != nil:
			text = c.shrink(t, &t.locks[t.rows[lay.first+i].lock], c.width, lay.names)
		case c.elide:
			text = elide(text, c.width, lay.peers[ci])
		}
		text = align(text, c.width, c.right)
		if !sel {
			text = cl.paint.on(text)
		}
		b.WriteString(text)
	}
	if sel {
		return t.st.Selected.Render(fitLine(b.String(), t.width))
	}
	return b.String()
}

func align(s string, w int, right bool) string {
	if right {
		return rcell(s, w)
	}
	return cell(s, w)
}

// rootOf reports whether l is a root blocker's hold that someone waits
// behind, and the root's cost.
func (t *lockTable) rootOf(l *model.Lock) (waitfor.Root, bool) {
	if !l.Granted || t.graph == nil {
		return waitfor.Root{}, false
	}
	r, ok := t.graph.Root(waitfor.Of(l))
	if !ok {
		return r, false
	}
	id := l.KeyID()
	for _, w := range t.graph.Waiters(r.Session) {
		for _, i := range t.graph.Waits(w) {
			if t.locks[i].KeyID() == id {
				return r, true
			}
		}
	}
	return r, false
}

// costText says what a root blocker costs in at most w cells: "5w (1
// direct) 2m30s", "5w 2m30s", "5w": the sessions waiting behind it,
// directly or through others, and the time they have waited in all.
func costText(c waitfor.Cost, w int) string {
	n := strconv.Itoa(c.Behind) + "w"
	long := n + " (" + strconv.Itoa(c.Direct) + " direct) " + fmtDur(c.Waited)
	if c.Direct == c.Behind {
		long = n + " " + fmtDur(c.Waited)
	}
	for _, s := range []string{long, n + " " + fmtDur(c.Waited)} {
		if width(s) <= w {
			return s
		}
	}
	return n
}

// blockedText lists whom a waiter waits for in at most w cells: "4242",
// "4242,4243", "4242 +3"; a name too long for w is elided against names
// (the sessions in view), so that owners sharing a prefix stay apart.
func blockedText(l *model.Lock, w int, names []string) string {
	if len(l.BlockedBy) == 0 && len(l.BlockedByOwners) == 0 {
		return ""
	}
	who := l.Blockers()
	s := Sanitize(who[0])
	if len(who) == 1 {
		return elide(s, w, names)
	}
	for i := 1; i < len(who); i++ {
		next := s + "," + Sanitize(who[i])
		if width(next) > w {
			more := " +" + strconv.Itoa(len(who)-i)
			return elide(s, w-len(more), names) + more
		}
		s = next
	}
	return s
}
