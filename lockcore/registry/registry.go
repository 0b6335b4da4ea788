package registry

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Kind says how an entry maps onto keys.
type Kind int

// Entry kinds, one per way a lock is named.
const (
	// Space is a two-int advisory namespace: every key (ID, id).
	Space Kind = iota + 1
	// Fixed is one fixed one-bigint advisory key, ID.
	Fixed
	// Hashed is a pattern of strings hashed with FNV1a32 into one-bigint
	// advisory keys; its keys spread over the int32 range and cannot be
	// named back from the number alone.
	Hashed
	// RedisKey is a pattern of Redis keys (seed 002's session mutex), its
	// placeholders in braces: "sesslock:{tenant}:{agent}:{customer}:{channel}".
	RedisKey
	// LeaseLevel is a level of lease resources (seed 004): Pattern is the
	// lock_id form, "map:{mapId}", and ID the level's place in the global
	// lock order (1 first).
	LeaseLevel
)

var kindNames = [...]string{
	Space: "namespace", Fixed: "fixed id", Hashed: "FNV-1a hash",
	RedisKey: "Redis key", LeaseLevel: "lease level",
}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Entry is one registered use of lock keys, as seed 003's table records it.
type Entry struct {
	Name     string
	Kind     Kind
	ID       int64  // the space (Space), the key (Fixed), the order (LeaseLevel)
	Pattern  string // the key pattern (Hashed, RedisKey, LeaseLevel)
	Owner    string // component that takes the lock
	Purpose  string
	Scope    string
	LockType string // "Session (pg_advisory_lock)", "Redis SET NX PX", ...
	FileRef  string
	// Databases and Applications say where the entry's keys mean what it
	// says (Applies): path.Match patterns of database names, and of the
	// application_name of a session that holds or waits for the key.
	// Empty: anywhere.
	Databases    []string
	Applications []string
	// Line is the entry's line in the file it was read from; 0 for the
	// built-in table.
	Line int
}

// Prefix returns the literal text of Pattern before its first placeholder:
// "sesslock:" for "sesslock:{tenant}:…", "map:" for "map:{mapId}".
func (e Entry) Prefix() string {
	p, _, _ := strings.Cut(e.Pattern, "{")
	return p
}

var (
	spaces   = map[int32]Entry{}
	fixed    = map[int64]Entry{}
	checkErr = validate(entries)
)

func init() {
	for _, e := range entries {
		switch e.Kind {
		case Space:
			if _, dup := spaces[int32(e.ID)]; !dup {
				spaces[int32(e.ID)] = e
			}
		case Fixed:
			if _, dup := fixed[e.ID]; !dup {
				fixed[e.ID] = e
			}
		}
	}
}

// Entries returns every entry, in table order. The slice is a copy.
func Entries() []Entry { return append([]Entry(nil), entries...) }

// Of returns the entries of one kind, in table order.
func Of(k Kind) []Entry {
	var out []Entry
	for _, e := range entries {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// Lookup returns the entry named name.
func Lookup(name string) (Entry, bool) {
	for _, e := range entries {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Check reports a duplicate or malformed entry in the table. Lookups use the
// first of any duplicates.
func Check() error { return checkErr }

// validate returns the first error Problems reports.
func validate(list []Entry) error {
	for _, p := range Problems(list) {
		if !p.Warning {
			return p
		}
	}
	return nil
}

// WriteMarkdown writes the table as the markdown seed 003 keeps by hand,
// every kind in one table.
func WriteMarkdown(w io.Writer) error { return writeMarkdown(w, entries) }

// WriteMarkdown writes r's entries as a registry file (file.go), with the
// Databases and Applications columns when an entry has a scope.
func (r *Registry) WriteMarkdown(w io.Writer) error { return writeMarkdown(w, r.entries) }

func writeMarkdown(w io.Writer, list []Entry) error {
	scoped := false
	for _, e := range list {
		scoped = scoped || e.Scoped()
	}
	var b strings.Builder
	b.WriteString("| Name | Key | Component | Purpose | Scope | Lock Type | File Reference |")
	rule := "|------|-----|-----------|---------|-------|-----------|----------------|"
	if scoped {
		b.WriteString(" Databases | Applications |")
		rule += "-----------|--------------|"
	}
	b.WriteString("\n" + rule + "\n")
	for _, e := range list {
		var key string
		switch e.Kind {
		case Space:
			key = fmt.Sprintf("`(%d, id)`", e.ID)
		case Fixed:
			key = fmt.Sprintf("`%d`", e.ID)
		case Hashed:
			key = fmt.Sprintf("FNV-1a of `%s`", e.Pattern)
		case RedisKey:
			key = fmt.Sprintf("Redis `%s`", e.Pattern)
		case LeaseLevel:
			key = fmt.Sprintf("lease `%s` (order %d)", e.Pattern, e.ID)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | `%s` |",
			e.Name, key, mdCell(e.Owner), mdCell(e.Purpose), mdCell(e.Scope), mdCell(e.LockType), e.FileRef)
		if scoped {
			fmt.Fprintf(&b, " %s | %s |", mdCell(strings.Join(e.Databases, ", ")), mdCell(strings.Join(e.Applications, ", ")))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
