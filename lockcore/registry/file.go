package registry

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// A registry file is markdown: every table in it whose header has a key
// column is read, every other line is left alone, so the lock registry a
// team keeps by hand is read as it is. Columns are found by their header,
// in any order and case:
//
//	Lock ID, Key          the key: 42424242 or 0x2A (a fixed one-bigint key),
//	                      (1, id) (a two-int space), FNV-1a of `{tenantId}:{date}`,
//	                      Redis `sesslock:{tenant}:…`, lease `map:{mapId}` (order 2)
//	Hash Input Pattern    the key column of a table of FNV-1a hashed patterns
//	Name                  the name monitors show; without it, the Component
//	Component (Owner), Purpose, Scope, Lock Type, File Reference
//	Databases             where it applies: database names, comma-separated
//	Applications          application_name patterns of the sessions on the key
//
// The table `locktop registry` prints is such a file.

// ErrNoTable: a registry file with no table that has a key column.
var ErrNoTable = fmt.Errorf("no registry table in it (a markdown table with a Lock ID, Key or Hash Input Pattern column)")

// Load reads the registry file at path and makes a Registry of it; a
// problem that Problems reports as an error is an error here, with its line.
func Load(path string) (*Registry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r, err := New(entries)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse reads the entries of a registry file (see the format above), each
// with its line. It fails on a key it cannot read, with the line.
func Parse(r io.Reader) ([]Entry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var (
		out    []Entry
		cols   map[string]int // the current table's columns, nil outside one
		hashed bool           // its key column is a Hash Input Pattern
		header []string       // a line that may open a table
		line   int
		names  = map[string]bool{}
	)
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(text, "|") {
			cols, header = nil, nil
			continue
		}
		cells := splitRow(text)
		switch {
		case header != nil && isRule(cells):
			cols, hashed = columns(header)
			header = nil
			continue
		case cols == nil:
			header = cells
			continue
		}
		e, err := entry(cells, cols, hashed)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		e.Line = line
		if e.Name == "" {
			// A table kept by hand names the component, not the lock: the
			// component is the name, told apart by its key when it has several.
			e.Name = e.Owner
			if e.Name == "" || names[e.Name] {
				e.Name = strings.TrimSpace(e.Owner + " " + keyText(e))
			}
		}
		names[e.Name] = true
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, ErrNoTable
	}
	return out, nil
}

// splitRow splits a table row at its unescaped pipes.
func splitRow(s string) []string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "|"), "|")
	var cells []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '|':
			b.WriteByte('|')
			i++
		case s[i] == '|':
			cells = append(cells, strings.TrimSpace(b.String()))
			b.Reset()
		default:
			b.WriteByte(s[i])
		}
	}
	return append(cells, strings.TrimSpace(b.String()))
}

var ruleCell = regexp.MustCompile(`^:?-+:?$`)

func isRule(cells []string) bool {
	for _, c := range cells {
		if !ruleCell.MatchString(c) {
			return false
		}
	}
	return len(cells) > 0
}

// columns maps a header's cells to the fields they hold; nil when it has
// no key column (a change log, a table of something else).
func columns(header []string) (map[string]int, bool) {
	cols := map[string]int{}
	hashed := false
	for i, h := range header {
		switch strings.ToLower(strings.Trim(h, "*_` ")) {
		case "lock id", "key", "id":
			cols["key"] = i
		case "hash input pattern", "pattern":
			cols["key"], hashed = i, true
		case "name":
			cols["name"] = i
		case "component", "owner":
			cols["owner"] = i
		case "purpose":
			cols["purpose"] = i
		case "scope":
			cols["scope"] = i
		case "lock type", "type":
			cols["type"] = i
		case "file reference", "file", "reference":
			cols["file"] = i
		case "databases", "database":
			cols["db"] = i
		case "applications", "application", "application_name":
			cols["app"] = i
		}
	}
	// A key column alone is not a registry (a table of key bindings): it
	// names what the key is for too.
	_, key := cols["key"]
	_, name := cols["name"]
	_, owner := cols["owner"]
	_, purpose := cols["purpose"]
	if !key || !name && !owner && !purpose {
		return nil, false
	}
	return cols, hashed
}

var (
	spaceKey = regexp.MustCompile(`^\(\s*(-?\d+)\s*,\s*[^)]*\)$`)
	leaseKey = regexp.MustCompile("^lease\\s+`?([^`]+?)`?\\s*\\(order\\s+(\\d+)\\)$")
)

// entry reads one row.
func entry(cells []string, cols map[string]int, hashed bool) (Entry, error) {
	get := func(c string) string {
		i, ok := cols[c]
		if !ok || i >= len(cells) {
			return ""
		}
		return cells[i]
	}
	e := Entry{Name: unquote(get("name")), Owner: unquote(get("owner")), Purpose: get("purpose"), Scope: get("scope"),
		LockType: get("type"), FileRef: unquote(get("file")), Databases: list(get("db")), Applications: list(get("app"))}
	key := get("key")
	k := unquote(key)
	switch {
	case hashed:
		e.Kind, e.Pattern = Hashed, k
	case strings.HasPrefix(key, "FNV-1a of "):
		e.Kind, e.Pattern = Hashed, unquote(strings.TrimPrefix(key, "FNV-1a of "))
	case strings.HasPrefix(key, "Redis "):
		e.Kind, e.Pattern = RedisKey, unquote(strings.TrimPrefix(key, "Redis "))
	case leaseKey.MatchString(key):
		m := leaseKey.FindStringSubmatch(key)
		e.Kind, e.Pattern = LeaseLevel, m[1]
		e.ID, _ = strconv.ParseInt(m[2], 10, 64)
	case spaceKey.MatchString(k):
		e.Kind = Space
		e.ID, _ = strconv.ParseInt(spaceKey.FindStringSubmatch(k)[1], 10, 64)
	default:
		id, err := strconv.ParseInt(k, 0, 64)
		if err != nil {
			return e, fmt.Errorf("cannot read the key %q: want 42424242, (1, id), FNV-1a of `{a}:{b}`, Redis `p:{x}` or lease `p:{x}` (order 1)", key)
		}
		e.Kind, e.ID = Fixed, id
	}
	return e, nil
}

// unquote takes the backticks off a cell: `42424242` → 42424242.
func unquote(s string) string { return strings.TrimSpace(strings.Trim(strings.TrimSpace(s), "`")) }

// list reads a comma-separated cell of patterns; "", "*", "any" and "all"
// mean anywhere.
func list(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = unquote(p)
		switch strings.ToLower(p) {
		case "", "*", "any", "all", "—", "-":
			continue
		}
		out = append(out, p)
	}
	return out
}

// keyText is an entry's key as a file writes it.
func keyText(e Entry) string {
	switch e.Kind {
	case Space:
		return fmt.Sprintf("(%d, id)", e.ID)
	case Fixed:
		return strconv.FormatInt(e.ID, 10)
	}
	return e.Pattern
}
