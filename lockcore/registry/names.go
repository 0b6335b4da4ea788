package registry

import (
	"strconv"
	"strings"
	"unicode/utf16"
)

// FNV1a32 hashes s exactly as seed 003's TypeScript hashString does: 32-bit
// FNV-1a over the UTF-16 code units of s (not its UTF-8 bytes), returned as a
// signed integer. Invalid UTF-8 in s hashes as U+FFFD, as a JavaScript string
// decoded from those bytes would hold. (hash/fnv hashes bytes, so it would
// disagree with the TypeScript service on every non-ASCII string.)
func FNV1a32(s string) int32 {
	const (
		offset = 2166136261
		prime  = 16777619
	)
	h := uint32(offset)
	for _, r := range s {
		if r < 0x10000 {
			h ^= uint32(r)
			h *= prime
			continue
		}
		a, b := utf16.EncodeRune(r)
		h ^= uint32(a)
		h *= prime
		h ^= uint32(b)
		h *= prime
	}
	return int32(h)
}

// AdvisoryNamespace names an advisory key's namespace as monitors show it:
// for a two-int key (pair) the registered name of its space, or the space in
// decimal; for a one-bigint key the registered name of that fixed id, or "".
// hi is the space (pair) and v the whole one-bigint key (not pair).
func AdvisoryNamespace(pair bool, hi int32, v int64) string {
	if pair {
		if e, ok := spaces[hi]; ok {
			return e.Name
		}
		return strconv.Itoa(int(hi))
	}
	if e, ok := fixed[v]; ok {
		return e.Name
	}
	return ""
}

// AdvisoryLabel renders an advisory key for people, from its namespace (as
// AdvisoryNamespace gives it) and its signed entity id: "AGENT 7", "5 -3",
// "IDEMPOTENCY_CLEANUP" or "-2128831035". It is the one key formatter: the
// lock library, the monitor and the dashboard all print keys with it.
func AdvisoryLabel(namespace string, entityID int64, pair bool) string {
	id := strconv.FormatInt(entityID, 10)
	switch {
	case pair:
		return namespace + " " + id
	case namespace != "":
		return namespace
	default:
		return id
	}
}

// Match returns the entry whose Pattern matches s, among entries of kind k
// (Hashed, RedisKey or LeaseLevel): literal text must be equal and each
// {placeholder} stands for one or more characters other than ':'. When
// several match, the one with the most literal text wins (a string
// "t:balance:9" is BOOKING_BALANCE, not BOOKING_DATE).
func Match(k Kind, s string) (Entry, bool) {
	// By index: an Entry is large, and monitors match every lock of a
	// listing (1,000 leases a poll).
	best, bestLit := -1, -1
	for i := range entries {
		if entries[i].Kind != k {
			continue
		}
		if lit, ok := match(entries[i].Pattern, s); ok && lit > bestLit {
			best, bestLit = i, lit
		}
	}
	if best < 0 {
		return Entry{}, false
	}
	return entries[best], true
}

// OtherPattern is RedisPattern's answer for a key no registered pattern
// fits, so labels built from it stay bounded whatever the keys are.
const OtherPattern = "other"

// RedisPattern names a Redis key (without its prefix) by the registered
// RedisKey pattern it fits, written with prefix in place of the pattern's
// own: "sesslock:{tenant}:{agent}:{customer}:{channel}" for a session key
// under "sesslock:"; OtherPattern when it fits none.
func RedisPattern(prefix, key string) string {
	// By index, not Of: monitors name every key of a listing (1,000 a poll).
	for i := range entries {
		e := &entries[i]
		if e.Kind != RedisKey {
			continue
		}
		if m, ok := Match(RedisKey, e.Prefix()+key); ok && m.Name == e.Name {
			return prefix + strings.TrimPrefix(e.Pattern, e.Prefix())
		}
	}
	return OtherPattern
}

// match reports whether s fits pattern, and how many literal characters
// the pattern has.
func match(pattern, s string) (literal int, ok bool) {
	for pattern != "" {
		open := strings.IndexByte(pattern, '{')
		if open < 0 {
			return literal + len(pattern), s == pattern
		}
		lit := pattern[:open]
		if !strings.HasPrefix(s, lit) {
			return 0, false
		}
		literal += len(lit)
		s = s[len(lit):]
		end := strings.IndexByte(pattern[open:], '}')
		if end < 0 {
			return 0, false // malformed: validate would not let it in
		}
		pattern = pattern[open+end+1:]
		// The placeholder runs to the next ':' (or the end).
		n := strings.IndexByte(s, ':')
		if n < 0 {
			n = len(s)
		}
		if n == 0 {
			return 0, false
		}
		s = s[n:]
	}
	return literal, s == ""
}

// RowLabel renders a row lock's key: the relation's schema-qualified name
// and the row's tuple id, "public.turns row (0,3)". relation "" (a relation
// known neither by name nor by oid) reads as "relation ?"; tid "" leaves
// the row out.
func RowLabel(relation, tid string) string {
	if relation == "" {
		relation = "relation ?"
	}
	if tid == "" {
		return relation
	}
	return relation + " row " + tid
}

// TransactionLabel renders a transaction id lock's key: "transaction 1234".
func TransactionLabel(xid string) string { return "transaction " + xid }

// NamedLabel renders a key that is a name already (a Redis key, a lease
// resource such as "map:m1"), as it is: names are shown as their owners
// wrote them; the registry's pattern names their kind (NameOf).
func NamedLabel(name string) string { return name }

// NameOf returns the registry's name of the pattern a Redis key or a lease
// resource fits (kind RedisKey or LeaseLevel), or "" when none does.
func NameOf(k Kind, s string) string {
	if e, ok := Match(k, s); ok {
		return e.Name
	}
	return ""
}
