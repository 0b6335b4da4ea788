package registry

import (
	"path"
	"slices"
	"strconv"
)

// ownApps are the application names of this project's own sessions: the
// lock library's (lockcore.DefaultApplicationName "locktop.lock"), the
// simulator's work and shared pools, the workers' live sessions and the
// monitor's health probe all begin with "locktop.". The built-in entries
// describe these systems, so on a server locktop has just met they name a
// key only where one of these sessions holds or waits for it: elsewhere
// pg_advisory_lock(1, 7) is someone else's (1, 7), not AGENT 7.
var ownApps = []string{"locktop.*"}

// Scope is where a key was seen: the database (as the monitor reports it,
// model.Lock.Database) and the application names of the sessions that
// hold or wait for it there.
type Scope struct {
	Database     string
	Applications []string
}

// Applies reports whether e names keys seen in sc: its Databases match
// sc.Database (or it has none) and its Applications match one of
// sc.Applications (or it has none). Patterns are path.Match patterns:
// "app_*", "billing?".
func (e Entry) Applies(sc Scope) bool {
	if len(e.Databases) > 0 && !matchAny(e.Databases, sc.Database) {
		return false
	}
	if len(e.Applications) == 0 {
		return true
	}
	for _, a := range sc.Applications {
		if matchAny(e.Applications, a) {
			return true
		}
	}
	return false
}

// Scoped reports whether e applies only somewhere.
func (e Entry) Scoped() bool { return len(e.Databases) > 0 || len(e.Applications) > 0 }

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, s); ok && err == nil {
			return true
		}
	}
	return false
}

// A Registry is a set of entries that name the keys a monitor sees: the
// built-in one (Builtin), a user's file (Load), or both (Join). Unlike
// the package's table, which the lock library names its own keys with,
// a Registry's entries say where they apply. It is read-only once made,
// so safe for concurrent use.
type Registry struct {
	entries []Entry
	spaces  map[int32][]int // entries of each space, in order
	fixed   map[int64][]int
}

// New makes a Registry of entries, in order of precedence; it rejects
// what Problems reports as an error.
func New(entries []Entry) (*Registry, error) {
	for _, p := range Problems(entries) {
		if !p.Warning {
			return nil, p
		}
	}
	return build(entries), nil
}

func build(entries []Entry) *Registry {
	r := &Registry{entries: slices.Clone(entries), spaces: map[int32][]int{}, fixed: map[int64][]int{}}
	for i, e := range r.entries {
		switch e.Kind {
		case Space:
			r.spaces[int32(e.ID)] = append(r.spaces[int32(e.ID)], i)
		case Fixed:
			r.fixed[e.ID] = append(r.fixed[e.ID], i)
		}
	}
	return r
}

// Builtin is the built-in table as a Registry: every advisory entry
// applies where one of this project's own sessions (application names
// "locktop.*") holds or waits for the key; the Redis key patterns and lease
// levels, which only this project's sources read, apply wherever they are
// read.
func Builtin() *Registry { return builtin }

// Everywhere is the built-in table with no scope: every entry applies on
// every server, as before registries had scopes (`--registry builtin`).
func Everywhere() *Registry { return everywhere }

var builtin, everywhere = func() (*Registry, *Registry) {
	scoped := slices.Clone(entries)
	for i := range scoped {
		if k := scoped[i].Kind; k == Space || k == Fixed || k == Hashed {
			scoped[i].Applications = ownApps
		}
	}
	return build(scoped), build(entries)
}()

// Join makes one Registry of several, the first's entries taking
// precedence over the next's where both name a key. It does not check
// entries against each other: a user's file may well name a space the
// built-in table names too, in its own databases.
func Join(rs ...*Registry) *Registry {
	var all []Entry
	for _, r := range rs {
		if r != nil {
			all = append(all, r.entries...)
		}
	}
	return build(all)
}

// Entries returns the registry's entries, in order of precedence.
func (r *Registry) Entries() []Entry { return slices.Clone(r.entries) }

// Advisory returns the entry naming an advisory key seen in sc: for a
// two-int key (pair) the entry of its space hi, else the entry of the
// one-bigint key v; the first in order that applies.
func (r *Registry) Advisory(pair bool, hi int32, v int64, sc Scope) (Entry, bool) {
	var cands []int
	if pair {
		cands = r.spaces[hi]
	} else {
		cands = r.fixed[v]
	}
	for _, i := range cands {
		if r.entries[i].Applies(sc) {
			return r.entries[i], true
		}
	}
	return Entry{}, false
}

// Candidates reports whether any entry could name the advisory key, in
// some scope: when none can, the key's name is its number and the sessions
// on it need not be gathered.
func (r *Registry) Candidates(pair bool, hi int32, v int64) bool {
	if pair {
		return len(r.spaces[hi]) > 0
	}
	return len(r.fixed[v]) > 0
}

// Unscoped returns the advisory key's name when it is the same in every
// scope: the first entry that could name it applies everywhere (no
// databases, no applications), so Advisory returns it whatever the scope
// and the sessions on the key need not be gathered. ok is false when no
// entry could name it, or the first that could is scoped.
func (r *Registry) Unscoped(pair bool, hi int32, v int64) (name string, ok bool) {
	cands := r.fixed[v]
	if pair {
		cands = r.spaces[hi]
	}
	if len(cands) == 0 {
		return "", false
	}
	if e := r.entries[cands[0]]; len(e.Databases) == 0 && len(e.Applications) == 0 {
		return e.Name, true
	}
	return "", false
}

// Namespace is AdvisoryNamespace with r's entries, in sc.
func (r *Registry) Namespace(pair bool, hi int32, v int64, sc Scope) string {
	if e, ok := r.Advisory(pair, hi, v, sc); ok {
		return e.Name
	}
	if pair {
		return strconv.Itoa(int(hi))
	}
	return ""
}

// Match is the package's Match with r's entries that apply in sc.
func (r *Registry) Match(k Kind, s string, sc Scope) (Entry, bool) {
	var best Entry
	bestLit := -1
	for _, e := range r.entries {
		if e.Kind != k || !e.Applies(sc) {
			continue
		}
		if lit, ok := match(e.Pattern, s); ok && lit > bestLit {
			best, bestLit = e, lit
		}
	}
	return best, bestLit >= 0
}

// NameOf is the package's NameOf with r's entries that apply in sc.
func (r *Registry) NameOf(k Kind, s string, sc Scope) string {
	if e, ok := r.Match(k, s, sc); ok {
		return e.Name
	}
	return ""
}
