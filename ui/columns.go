package ui

import (
	"strconv"

	"github.com/locktop/locktop/model"
)

// column is one column of the lock table: its title, the bounds its width
// is measured between, and how a row fills it.
type column struct {
	title    string
	min, max int
	right    bool
	// flex columns give up width first when the table is narrow, in the
	// order of their flex (1 first), down to min.
	flex int
	// cell is a row's text in this column and its paint.
	cell func(t *lockTable, r tableRow, l *model.Lock) (string, paint)
	// shrink, if not nil, renders a cell narrower than its text otherwise
	// than by cutting it (BLOCKED BY: "4242 +3").
	shrink func(l *model.Lock, w int) string
	width  int
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
}

const markW = 2 // "› " in front of the selected row

// layout lays the table out for its width by content: each column gets
// what its visible cells need (within its bounds); when that is more than
// the width, MODE goes first (a share lock then says "sh" in its state),
// then the flexible columns give up width. USER and QUERY come last, in what is
// left.
func (t *lockTable) layout() tableLayout {
	first := t.offset
	end := min(t.offset+t.visible(), len(t.rows))
	lay := t.measure(first, end, t.columns(true))
	if lay.used() > t.width-markW {
		lay = t.measure(first, end, t.columns(false))
	}
	lay.fit(t.width - markW)
	rest := t.width - markW - lay.used()
	extra := t.extraColumns()
	// USER only when the query still gets a useful width beside it.
	if user := t.measure(first, end, extra[:1]); rest-(user.cols[0].width+1) >= 30 {
		lay.add(user)
		rest -= user.cols[0].width + 1
	}
	if rest >= 13 {
		q := t.measure(first, end, extra[1:])
		q.cols[0].width = rest - 1
		lay.add(q)
	}
	return lay
}

// measure fills the cells of rows [first, end) for cols and sizes each
// column to its widest cell and title, within its bounds.
func (t *lockTable) measure(first, end int, cols []column) tableLayout {
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
	for ci := range lay.cols {
		c := &lay.cols[ci]
		c.width = min(max(c.width, c.min), c.max)
	}
	return lay
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

// fit shrinks the flexible columns, in order, until the columns fit w
// cells; it reports whether they do.
func (l *tableLayout) fit(w int) bool {
	for flex := 1; flex <= 3 && l.used() > w; flex++ {
		for ci := range l.cols {
			c := &l.cols[ci]
			if c.flex == flex {
				c.width = max(c.min, c.width-(l.used()-w))
			}
		}
	}
	return l.used() <= w
}

// add appends the columns of o (measured on the same rows) at the right.
func (l *tableLayout) add(o tableLayout) {
	l.cols = append(l.cols, o.cols...)
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
// one kind is in the table, then the key, state, holder, application, mode
// (withMode; else the state says "sh"), time and blocker.
func (t *lockTable) columns(withMode bool) []column {
	plain := paint{}
	p := &t.paints
	var cols []column
	if t.kinds > 1 {
		cols = append(cols, column{title: "KIND", min: 4, max: 12, flex: 3, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			if !r.first {
				return "", plain
			}
			return kindName(l.Kind), p.dim
		}})
	}
	cols = append(cols,
		column{title: "KEY", min: 12, max: 48, flex: 2, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
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
		column{title: "STATE", min: 5, max: 24, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			s, st := "holds", p.holds
			if !l.Granted {
				s, st = "waits #"+strconv.Itoa(l.QueuePos), p.waits
			}
			if !withMode && l.Mode == model.ModeShare {
				s += " sh"
			}
			if idle := idleInTx(l); idle != "" && l.Granted {
				s, st = s+" "+idle, p.idle
			}
			return s, st
		}},
		column{title: t.holderTitle(), min: 3, max: 24, right: true, flex: 3, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Holder()), plain
		}},
		column{title: "APPLICATION", min: 8, max: 32, flex: 1, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.ApplicationName), plain
		}},
	)
	if withMode {
		cols = append(cols, column{title: "MODE", min: 4, max: 20, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(modeText(l.Mode)), plain
		}})
	}
	return append(cols,
		column{title: "TIME", min: 4, max: 20, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			s, sev := lockTime(l, t.now(l))
			if t.st.Marks && sev != sevNone {
				s += " " + sev.mark()
			}
			return s, p.sev[sev]
		}},
		column{title: "BLOCKED BY", min: 6, max: 16, flex: 2, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return blockedText(l, 16), plain
		}, shrink: func(l *model.Lock, w int) string { return blockedText(l, w) }},
	)
}

// extraColumns are USER and QUERY, shown in the width the others leave.
func (t *lockTable) extraColumns() []column {
	p := &t.paints
	return []column{
		{title: "USER", min: 4, max: 16, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.User), paint{}
		}},
		{title: "QUERY", min: 12, max: 1 << 16, cell: func(t *lockTable, r tableRow, l *model.Lock) (string, paint) {
			return Sanitize(l.Query), p.dim
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
	lay := t.measure(t.offset, end, t.columns(true))
	return markW + lay.used()
}
