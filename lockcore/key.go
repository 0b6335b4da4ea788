package lockcore

import "github.com/locktop/locktop/lockcore/registry"

// Key is an advisory lock key: either two int32s or one int64. Keys are
// comparable and can be used as map keys.
type Key struct {
	hi, lo int32 // pair: space, id; single: the two halves of the int64
	pair   bool
}

// Pair returns the two-int key taken by pg_advisory_lock(space, id).
func Pair(space, id int32) Key { return Key{hi: space, lo: id, pair: true} }

// Int64 returns the one-bigint key taken by pg_advisory_lock(v).
func Int64(v int64) Key { return Key{hi: int32(v >> 32), lo: int32(v)} }

// FNV1a32 hashes s with 32-bit FNV-1a over its UTF-16 code units, as the
// TypeScript hashString of the service this project inherited its keys from
// does (registry.FNV1a32), so both compute the same key for the same
// string.
func FNV1a32(s string) int32 { return registry.FNV1a32(s) }

// HashKey returns the one-bigint key for a string: FNV1a32(s), the signed
// hash widened to bigint, as that service's pg_advisory_xact_lock(hashString(s))
// takes it.
func HashKey(s string) Key { return Int64(int64(FNV1a32(s))) }

// KeyFromString returns the two-int key (space, FNV1a32(s)).
func KeyFromString(space int32, s string) Key { return Pair(space, FNV1a32(s)) }

// IsPair reports whether k is a two-int key.
func (k Key) IsPair() bool { return k.pair }

// Space returns the first int of a two-int key, or the high half of a
// one-bigint key.
func (k Key) Space() int32 { return k.hi }

// ID returns the second int of a two-int key, or the low half of a one-bigint
// key.
func (k Key) ID() int32 { return k.lo }

// Int64 returns a one-bigint key's value, or for a two-int key the two ints
// packed high then low (which is not a lock PostgreSQL would confuse with it:
// pg_locks tells the two kinds apart by objsubid).
func (k Key) Int64() int64 { return int64(k.hi)<<32 | int64(uint32(k.lo)) }

// Namespace returns the name of the key's namespace as the monitor shows it:
// the registered name of a two-int key's space, or the space in decimal; for
// a one-bigint key the registered name of that fixed id, or "".
func (k Key) Namespace() string { return registry.AdvisoryNamespace(k.pair, k.hi, k.Int64()) }

// EntityID returns the signed id of a two-int key or the signed value of a
// one-bigint key.
func (k Key) EntityID() int64 {
	if k.pair {
		return int64(k.lo)
	}
	return k.Int64()
}

// String renders the key for people and logs: "AGENT 7", "5 -3",
// "IDEMPOTENCY_CLEANUP" or "-2128831035" (registry.AdvisoryLabel).
func (k Key) String() string { return registry.AdvisoryLabel(k.Namespace(), k.EntityID(), k.pair) }
