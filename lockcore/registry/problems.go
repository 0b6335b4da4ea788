package registry

import (
	"fmt"
	"math"
	"slices"
)

// A Problem is what is wrong with an entry of a registry, at its line of
// the file (0 for the built-in table). A Warning does not stop the
// registry from being used.
type Problem struct {
	Line    int
	Msg     string
	Warning bool
}

func (p Problem) Error() string {
	if p.Line > 0 {
		return fmt.Sprintf("registry: line %d: %s", p.Line, p.Msg)
	}
	return "registry: " + p.Msg
}

// Problems reports, in the order of entries: entries without a name or a
// pattern, names used twice, spaces, fixed ids, lease levels and patterns
// used by two entries that apply in the same place (colliding ids), spaces
// that do not fit in an int4 and, as warnings, fixed ids that lie in the
// int32 range that FNV-1a hashed keys take when the registry has hashed
// patterns (a hashed key may come out equal to it).
func Problems(list []Entry) []Problem {
	var out []Problem
	add := func(e Entry, warn bool, format string, args ...any) {
		out = append(out, Problem{Line: e.Line, Msg: fmt.Sprintf(format, args...), Warning: warn})
	}
	at := func(e Entry) string {
		if e.Line > 0 {
			return fmt.Sprintf("%s (line %d)", e.Name, e.Line)
		}
		return e.Name
	}
	hashed := false
	for _, e := range list {
		hashed = hashed || e.Kind == Hashed
	}
	for i, e := range list {
		if e.Name == "" {
			add(e, false, "an entry without a name")
			continue
		}
		switch e.Kind {
		case Space, Fixed, Hashed, RedisKey, LeaseLevel:
		default:
			add(e, false, "%s: unknown kind %d", e.Name, e.Kind)
			continue
		}
		if e.Kind == Space && e.ID != int64(int32(e.ID)) {
			add(e, false, "%s: space %d does not fit in int4", e.Name, e.ID)
		}
		if (e.Kind == Hashed || e.Kind == RedisKey || e.Kind == LeaseLevel) && e.Pattern == "" {
			add(e, false, "%s: a %s needs a pattern", e.Name, e.Kind)
		}
		if e.Kind == Fixed && hashed && e.ID >= math.MinInt32 && e.ID <= math.MaxInt32 {
			add(e, true, "%s: fixed id %d lies in the int32 range of FNV-1a hashed keys: a hashed key can take the same id", e.Name, e.ID)
		}
		for _, p := range list[:i] {
			switch {
			case p.Name == e.Name:
				add(e, false, "duplicate name %q, also %s", e.Name, at(p))
			case !overlap(p, e):
			case p.Kind == e.Kind && (e.Kind == Space || e.Kind == Fixed || e.Kind == LeaseLevel) && p.ID == e.ID:
				add(e, false, "%s %d used by both %s and %s", e.Kind, e.ID, at(p), at(e))
			case e.Pattern != "" && p.Pattern == e.Pattern && (e.Kind == Hashed || e.Kind == RedisKey || e.Kind == LeaseLevel):
				add(e, false, "pattern %q used by both %s and %s", e.Pattern, at(p), at(e))
			}
		}
	}
	return out
}

// overlap reports whether two entries may apply in one place: their
// database patterns, and their application patterns, have one in common,
// or one of them has none.
func overlap(a, b Entry) bool {
	some := func(x, y []string) bool {
		if len(x) == 0 || len(y) == 0 {
			return true
		}
		for _, p := range x {
			if slices.Contains(y, p) || matchAny(y, p) || matchAny([]string{p}, y[0]) {
				return true
			}
		}
		return false
	}
	return some(a.Databases, b.Databases) && some(a.Applications, b.Applications)
}
