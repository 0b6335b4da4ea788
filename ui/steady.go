package ui

import "time"

// settle is how long content must hold a new shape before the screen
// takes it: the table's columns, the gauges' rows, the arrangement of the
// panels. A resize takes the new shape at once.
const settle = 3 * time.Second

// steady holds a layout decision (a shape) still while the content
// changes under it: a new shape is taken when it has been wanted for
// settle without a break, or at once on a resize; a shape wanted for
// less (a table empty for a second, one lock of another kind) never makes
// the screen flip back and forth.
type steady[T comparable] struct {
	cur, next T
	since     time.Time // when next was first wanted
	set       bool
}

// hold returns the shape to draw, given the shape the content wants now.
// fresh takes want at once (the first layout, a resize).
func (s *steady[T]) hold(want T, now time.Time, fresh bool) T {
	switch {
	case !s.set || fresh:
		s.cur, s.next, s.set = want, want, true
	case want == s.cur:
		s.next = want
	case want != s.next:
		s.next, s.since = want, now
	case now.Sub(s.since) >= settle:
		s.cur = want
	}
	return s.cur
}
