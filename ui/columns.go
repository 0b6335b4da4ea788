package ui

import (
	"slices"
	"strconv"

	"github.com/locktop/locktop/model"
)

// column is one column of the lock table: its title, the bounds its width
// is measured between, and how a row fills it.
type column struct {
	id       string // what a held shape knows it by; the title when ""
	title    string
	min, max int
	right    bool
	// flex columns give up width first when the table is narrow, in the
	// order of their flex (1 first), down to min.
	flex int
	// cell is a row's text in this column and its paint.
	cell func(t *lockTable, r tableRow, l *model.Lock) (string, paint)
	// shrink, if not nil, renders a cell narrower than its text otherwise
	// than by cutting it (BLOCKED BY: "4242 +3"); names are the sessions
	// in view, for elide.
	shrink func(t *lockTable, l *model.Lock, w int, names []string) string
	// elide cuts a cell too long for the column in the part it shares
	// with the column's other cells, never in the part that tells them
	// apart (see elide).
	elide bool
	// optional columns are left out when no cell in view has text.
	optional bool
	width    int
}

// cellText is one rendered cell.
type cellText struct {
	text  string
	paint paint
}

// tableLayout is the columns of the visible rows, measured on their
// content, and the rows' cells.
type tableLayout struct {
	cols  []column
	first int          // the first visible row
	rows  [][]cellText // per visible row, per column
	// peers are the distinct texts of each eliding column in view, and
	// names the sessions in view (holders and waiters), for elide.
	peers [][]string
	names []string
	// brief: modes and kinds in short; kind: the KIND column is there.
	brief, kind bool
}

// ident is what a held shape knows the column by.
func (c *column) ident() string {
	if c.id != "" {
		return c.id
	}
	return c.title
}

// maxShapeCols bounds the columns a tableShape holds (all but USER and
// QUERY, which take what is left).
const maxShapeCols = 10

// tableShape is what makes the table look the way it does, held still by
// steady: which columns, how wide, modes and kinds in full or short.
type tableShape struct {
	brief, kind bool
	rows        bool // measured on rows: a shape of no rows is not held
	n           int
	ids         [maxShapeCols]string
	titles      [maxShapeCols]string
	widths      [maxShapeCols]int
}

// shapeOf is lay's shape (USER and QUERY aside: they follow).
func shapeOf(lay *tableLayout) tableShape {
	s := tableShape{brief: lay.brief, kind: lay.kind, rows: len(lay.rows) > 0}
	for _, c := range lay.cols {
		if c.title == "USER" || c.title == "QUERY" || s.n == maxShapeCols {
			break
		}
		s.ids[s.n], s.titles[s.n], s.widths[s.n] = c.ident(), c.title, c.width
		s.n++
	}
	return s
}

// grow is s with the room w asks for more of: each column as wide as the
// wider of the two, w's new columns added, short names if either has them.
func (s tableShape) grow(w *tableShape) tableShape {
	out := *w
	out.brief, out.kind, out.rows = s.brief || w.brief, s.kind || w.kind, s.rows || w.rows
	for i := range out.n {
		if hw, ok := s.width(out.ids[i]); ok {
			out.widths[i] = max(out.widths[i], hw)
			out.titles[i] = s.title(out.ids[i]) // a title is part of the shape held
		}
	}
	for i := range s.n {
		if _, ok := out.width(s.ids[i]); !ok && out.n < maxShapeCols {
			out.ids[out.n], out.titles[out.n], out.widths[out.n] = s.ids[i], s.titles[i], s.widths[i]
			out.n++
		}
	}
	return out
}

// title is the held title of column id.
func (s *tableShape) title(id string) string {
	for i := range s.n {
		if s.ids[i] == id {
			return s.titles[i]
		}
	}
	return id
}

// width is the held width of column id; a nil shape holds none.
func (s *tableShape) width(id string) (int, bool) {
	if s == nil {
		return 0, false
	}
	for i := range s.n {
		if s.ids[i] == id {
			return s.widths[i], true
		}
	}
	return 0, false
}

const markW = 2 // "› " in front of the selected row

// layout lays the table out for its width by content: each column gets
// what its visible cells need (within its bounds); when that is more than
// the width, modes and kinds take their short names (a mode is never cut),
// then the flexible columns give up width, eliding what their cells share.
// USER and QUERY come last, in what is left.
//
// With a held shape (see settle) the columns are the shape's, at its
// widths, whatever the content would have them be.
func (t *lockTable) layout() tableLayout {
	if t.laidOK && t.laidMarks == t.st.Marks {
		return t.laid // settle's, nothing changed since
	}
	if t.hasShape && t.shape.rows {
		return t.layoutFor(&t.shape)
	}
	return t.layoutFor(nil)
}

// layoutFor lays the table out for its content, or in held's shape.
func (t *lockTable) layoutFor(held *tableShape) tableLayout {
	t.layouts++
	first := t.offset
	end := min(t.offset+t.visible(), len(t.rows))
	kind := t.kinds > 1
	var lay tableLayout
	if held != nil {
		lay = t.measure(first, end, t.columns(held.brief, held.kind), held)
		for ci := range lay.cols {
			if w, ok := held.width(lay.cols[ci].ident()); ok {
				lay.cols[ci].width = w
				lay.cols[ci].title = held.title(lay.cols[ci].ident())
			}
		}
	} else {
		lay = t.measure(first, end, t.columns(false, kind), nil)
		if lay.used() > t.width-markW {
			lay = t.measure(first, end, t.columns(true, kind), nil)
			lay.brief = true
		}
	}
	lay.kind = kind
	if held != nil {
		lay.brief, lay.kind = held.brief, held.kind
	}
	lay.fit(t.width - markW)
	rest := t.width - markW - lay.used()
	extra := t.extraColumns()
	// USER only when the query still gets a useful width beside it.
	if user := t.measure(first, end, extra[:1], nil); rest-(user.cols[0].width+1) >= 30 {
		lay.add(user)
		rest -= user.cols[0].width + 1
	}
	if rest >= 13 {
		q := t.measure(first, end, extra[1:], nil)
		q.cols[0].width = rest - 1
		lay.add(q)
	}
	return lay
}

// measure fills the cells of rows [first, end) for cols and sizes each
// column to its widest cell and title, within its bounds.
// A held shape keeps its optional columns, empty or not.
func (t *lockTable) measure(first, end int, cols []column, held *tableShape) tableLayout {
	lay := tableLayout{cols: cols, first: first, rows: make([][]cellText, end-first)}
	for ci := range cols {
		lay.cols[ci].width = width(cols[ci].title)
	}
	for i := first; i < end; i++ {
		r := t.rows[i]
		l := &t.locks[r.lock]
		cells := make([]cellText, len(cols), len(cols)+2) // room for USER and QUERY
		for ci := range cols {
			text, p := cols[ci].cell(t, r, l)
			cells[ci] = cellText{text, p}
			lay.cols[ci].width = max(lay.cols[ci].width, width(text))
		}
		lay.rows[i-first] = cells
	}
	// A column with nothing in view (no application on a Redis key, no
	// waiter blocked) gives its title's room to the others.
	kept := lay.cols[:0]
	for ci, c := range lay.cols {
		if _, keep := held.width(c.ident()); c.optional && lay.empty(ci) && !keep {
			continue
		}
		kept = append(kept, c)
		for i := range lay.rows {
			lay.rows[i][len(kept)-1] = lay.rows[i][ci]
		}
	}
	for i := range lay.rows {
		lay.rows[i] = lay.rows[i][:len(kept)]
	}
	lay.cols = kept
	cols = kept
	lay.peers = make([][]string, len(cols))
	for ci := range lay.cols {
		c := &lay.cols[ci]
		c.width = min(max(c.width, c.min), c.max)
		if c.elide {
			lay.peers[ci] = distinct(lay.rows, ci)
		}
	}
	for i := first; i < end; i++ {
		lay.names = append(lay.names, Sanitize(t.locks[t.rows[i].lock].Holder()))
	}
	return lay
}

// empty reports whether column ci has no text in view.
func (l *tableLayout) empty(ci int) bool {
	for _, r := range l.rows {
		if r[ci].text != "" {
			return false
		}
	}
	return true
}

// distinct is the different texts of column ci in rows.
func distinct(rows [][]cellText, ci int) []string {
	var out []string
	for _, r := range rows {
		if s := r[ci].text; s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// used is the cells the columns take, the gaps between them included.
func (l *tableLayout) used() int {
	n := 0
	for i, c := range l.cols {
		if i > 0 {
			n++
		}
		n += c.width
	}
	return n
}

// fit shrinks the flexible columns, in order of their flex, until the
// columns fit w cells; of one flex the widest gives a cell first, so that
// they end alike rather than one at its minimum. It reports whether they
// fit.
func (l *tableLayout) fit(w int) bool {
	for flex := 1; flex <= 3 && l.used() > w; flex++ {
		for l.used() > w {
			widest := -1
			for ci := range l.cols {
				c := &l.cols[ci]
				if c.flex == flex && c.width > c.min && (widest < 0 || c.width > l.cols[widest].width) {
					widest = ci
				}
			}
			if widest < 0 {
				break
			}
			l.cols[widest].width--
		}
	}
	return l.used() <= w
}

// add appends the columns of o (measured on the same rows) at the right.
func (l *tableLayout) add(o tableLayout) {
	l.cols = append(l.cols, o.cols...)
	l.peers = append(l.peers, o.peers...)
	for i := range l.rows {
		l.rows[i] = append(l.rows[i], o.rows[i]...)
	}
}

// head renders the column titles.
func (l *tableLayout) head() string {
	b := spaces(markW)
	for i, c := range l.cols {
		if i > 0 {
			b += " "
		}
		b += align(c.title, c.width, c.right)
	}
	return b
}

// columns are the table's columns but USER and QUERY: KIND when more than
// one kind is in the table, then the key, state, holder, application,
// mode, time and blocker. brief gives modes and kinds their short names.
func (t *lockTable) columns(brief, kind bool) []column {
	plain := paint{}
	p := &t.paints
	var cols []column
	if t.servers {
		// Several targets: whose the key is, on its first row.
		cols = append(cols, column{title: "SERVER", min: 3, max: 16, flex: 3, optional: true, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			if !r.first {
				return "", plain
			}
			return Sanitize(l.Server), p.dim
		}})
	}
	if kind {
		cols = append(cols, column{title: "KIND", min: 4, max: 12, flex: 3, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			if !r.first {
				return "", plain
			}
			if brief {
				return kindShort(l.Kind), p.dim
			}
			return kindName(l.Kind), p.dim
		}})
	}
	cols = append(cols,
		column{title: "KEY", min: 12, max: 48, flex: 2, elide: true, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			switch {
			case r.first:
				s := l.KeyLabel()
				// An unnamed relation's label names its database already.
				if l.Database != "" && t.db != "" && l.Database != t.db && (l.Relation != "" || l.RelationOID == 0) {
					s += " @" + l.Database
				}
				return Sanitize(s), p.key
			case r.last:
				return " └─", p.tree
			}
			return " ├─", p.tree
		}},
		column{title: "STATE", min: 5, max: 24, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			s, st := "holds", p.holds
			if _, root := t.rootOf(l); root {
				s, st = "ROOT", p.root
			}
			if !l.Granted {
				s, st = "waits #"+strconv.Itoa(l.QueuePos), p.waits
			}
			if idle := idleInTx(l); idle != "" && l.Granted {
				s, st = s+" "+idle, p.idle
			}
			return s, st
		}},
		column{id: "holder", title: t.holderTitle(), min: 3, max: 40, right: true, flex: 3, elide: true, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Holder()), plain
		}},
		column{title: "APPLICATION", min: 8, max: 32, flex: 1, elide: true, optional: true, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Session().ApplicationName), plain
		}},
		column{title: "MODE", min: 4, max: 24, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			if brief {
				return Sanitize(shortMode(l.Mode)), plain
			}
			return Sanitize(modeText(l.Mode)), plain
		}},
		column{title: "TIME", min: 4, max: 20, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			s, sev := lockTime(l, t.now(l))
			if t.st.Marks && sev != sevNone {
				s += " " + sev.mark()
			}
			return s, p.sev[sev]
		}},
		column{title: "BLOCKED BY", min: 6, max: 48, flex: 2, optional: true, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			if c, root := t.rootOf(l); root {
				return costText(c.Cost, 12), p.root
			}
			return blockedText(l, 48, nil), plain
		}, shrink: func(t *lockTable, l *model.Lock, w int, names []string) string {
			if c, root := t.rootOf(l); root {
				return costText(c.Cost, w)
			}
			return blockedText(l, w, names)
		}},
	)
	return cols
}

// extraColumns are USER and QUERY, shown in the width the others leave.
func (t *lockTable) extraColumns() []column {
	p := &t.paints
	return []column{
		{title: "USER", min: 4, max: 16, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Session().User), paint{}
		}},
		{title: "QUERY", min: 12, max: 1 << 16, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Session().Query), p.dim
		}},
	}
}

// holderTitle names the holder column for what its rows hold: a backend's
// pid, a Redis or lease owner, or both.
func (t *lockTable) holderTitle() string {
	pids, owners := false, false
	for _, r := range t.rows[t.offset:min(t.offset+t.visible(), len(t.rows))] {
		if t.locks[r.lock].PID != 0 {
			pids = true
		} else {
			owners = true
		}
	}
	switch {
	case owners && pids:
		return "PID/OWNER"
	case owners:
		return "OWNER"
	}
	return "PID"
}

// need is the width the table's columns need for their content (USER and
// QUERY aside), measured on the rows in view.
func (t *lockTable) need() int {
	end := min(t.offset+max(t.visible(), 20), len(t.rows))
	lay := t.measure(t.offset, end, t.columns(false, t.kinds > 1), nil)
	return markW + lay.used()
}
