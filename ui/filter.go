package ui

import (
	"strconv"
	"strings"

	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// filter selects lock rows. Its text is one of
//
//	ns:TEXT, key:TEXT   the key's label contains TEXT ("ns:AGENT", "ns:AGENT 7")
//	ns:NAME =ID         exactly the key ID of namespace NAME ("ns:AGENT =1")
//	key:"LABEL"         exactly the key LABEL ("key:\"AGENT 1\"")
//	app:TEXT            the application name contains TEXT
//	pid:N               the backend's pid is N
//	kind:TEXT           the lock's kind contains TEXT ("kind:lease")
//	database:NAME       the lock is in database NAME, exactly ("db:NAME" too)
//	server:NAME         the lock is of target NAME (several targets)
//	TEXT                any of the above, or the owner; a number also matches
//	                    the pid exactly
//
// Matching ignores case. A TEXT given as it is (no field, or key:) also
// finds the one-bigint key it hashes to with FNV-1a (registry.FNV1a32), so
// "tenant-a:2025-01-15" finds the lock the MAIS booking service takes for
// it; the hash is of the text as typed, case kept.
type filter struct {
	raw   string
	field string // "ns", "app", "pid", "kind", "db", "server" or "" for any
	text  string // lower-cased
	pid   int64
	isPID bool

	exact   bool   // the key must be exactly…
	label   string // …this label (lower-cased), or
	ns      string // …this namespace (lower-cased)
	id      int64  // …and id
	byID    bool   // ns and id set
	hashed  int64  // the FNV-1a key of the text as typed
	hashes  bool   // hashed applies
	pattern string // the registry's name of the hashed pattern the text fits, if any
}

func parseFilter(s string) filter {
	s = strings.TrimSpace(s)
	f := filter{raw: s}
	if name, rest, ok := strings.Cut(s, ":"); ok {
		switch strings.ToLower(name) {
		case "ns", "key", "namespace":
			f.field = "ns"
			s = rest
		case "app", "application":
			f.field = "app"
			s = rest
		case "pid":
			f.field = "pid"
			s = rest
		case "kind":
			f.field = "kind"
			s = rest
		case "db", "database":
			f.field = "db"
			s = rest
		case "server":
			f.field = "server"
			s = rest
		}
	}
	s = strings.TrimSpace(s)
	f.text = strings.ToLower(s)
	if n, err := strconv.ParseInt(f.text, 10, 64); err == nil {
		f.pid, f.isPID = n, true
	}
	if f.field == "ns" {
		f.parseExact(s)
	}
	if (f.field == "" || f.field == "ns") && !f.exact && s != "" {
		f.hashed, f.hashes = int64(registry.FNV1a32(s)), true
		if e, ok := registry.Match(registry.Hashed, s); ok {
			f.pattern = e.Name
		}
	}
	return f
}

// parseExact reads the exact forms of a key: "LABEL" in quotes, =LABEL,
// or NAME =ID.
func (f *filter) parseExact(s string) {
	switch {
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
		f.exact, f.label = true, strings.ToLower(strings.TrimSpace(s[1:len(s)-1]))
	case strings.HasPrefix(s, "="):
		f.exact, f.label = true, strings.ToLower(strings.TrimSpace(s[1:]))
	default:
		name, id, ok := strings.Cut(s, "=")
		if !ok {
			return
		}
		n, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
		if err != nil {
			return
		}
		f.exact, f.byID, f.ns, f.id = true, true, strings.ToLower(strings.TrimSpace(name)), n
	}
}

func (f filter) empty() bool { return f.text == "" }

func (f filter) match(l *model.Lock) bool {
	switch f.field {
	case "ns":
		return f.matchKey(l)
	case "app":
		return containsFold(l.Session().ApplicationName, f.text)
	case "pid":
		return f.isPID && int64(l.PID) == f.pid
	case "kind":
		return containsFold(string(l.Kind), f.text)
	case "db":
		// Exactly: "database:app" must not also pick app_archive.
		return strings.EqualFold(l.Database, f.text)
	case "server":
		return strings.ToLower(l.Server) == f.text
	}
	return (f.isPID && int64(l.PID) == f.pid) ||
		f.matchKey(l) ||
		containsFold(l.Session().ApplicationName, f.text) ||
		containsFold(l.Owner, f.text)
}

// matchKey matches the key alone: exactly, by its hash, or by its label.
func (f filter) matchKey(l *model.Lock) bool {
	switch {
	case f.byID:
		return l.Pair && l.EntityID == f.id && strings.EqualFold(l.Namespace, f.ns)
	case f.exact:
		return strings.EqualFold(l.KeyLabel(), f.label)
	case f.hashes && !l.Pair && l.Kind == model.KindAdvisory && l.EntityID == f.hashed:
		return true
	}
	return containsFold(l.KeyLabel(), f.text)
}

// describe says what the filter found for the table's title: its text,
// and the key a hashed pattern's string stands for.
func (f filter) describe() string {
	s := strconv.Quote(f.raw)
	if f.pattern != "" {
		s += " (" + f.pattern + " key " + strconv.FormatInt(f.hashed, 10) + ")"
	}
	return s
}

// containsFold reports whether s contains the lower-case sub, ignoring case.
func containsFold(s, sub string) bool {
	if len(sub) > len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 0x80 {
			return strings.Contains(strings.ToLower(s), sub)
		}
	}
	return strings.Contains(s, sub)
}
