package lockcore_test

import (
	"math"
	"testing"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// Vectors computed with seed 003's TypeScript hashString under Node.js:
//
//	function hashString(input) { let hash = 2166136261;
//	  for (let i = 0; i < input.length; i++) { hash ^= input.charCodeAt(i); hash = Math.imul(hash, 16777619); }
//	  return hash | 0; }
func TestFNV1a32MatchesSeed003(t *testing.T) {
	for s, want := range map[string]int32{
		"":                           -2128831035,
		"a":                          -468965076,
		"foobar":                     -1080231576,
		"tenant-1:2025-01-15":        761239885,
		"tenant-1:balance:booking-9": 775086422,
		"é":                          1812687940,  // one UTF-16 unit, two UTF-8 bytes
		"😀":                          -885930824,  // a surrogate pair
		"日本語:2025-12-03":             -1150457835, // multi-byte BMP characters
		"AGENT":                      -122962362,
	} {
		if got := lockcore.FNV1a32(s); got != want {
			t.Errorf("FNV1a32(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestKeyConstructors(t *testing.T) {
	if k := lockcore.Pair(registry.SpaceAgent, 7); k != lockcore.Pair(1, 7) || !k.IsPair() || k.String() != "AGENT 7" {
		t.Errorf("Pair(registry.SpaceAgent, 7) = %v", k)
	}
	if k := lockcore.HashKey("a"); k != lockcore.Int64(-468965076) || k.IsPair() {
		t.Errorf("HashKey(a) = %v, want Int64(-468965076)", k)
	}
	if k := lockcore.KeyFromString(9, "a"); k != lockcore.Pair(9, -468965076) {
		t.Errorf("KeyFromString(9, a) = %v", k)
	}
	if k := lockcore.Int64(42424242); k.String() != "IDEMPOTENCY_CLEANUP" || k.Namespace() != "IDEMPOTENCY_CLEANUP" {
		t.Errorf("fixed id renders as %q", k.String())
	}
	if k := lockcore.Pair(-5, -3); k.Namespace() != "-5" || k.EntityID() != -3 || k.String() != "-5 -3" {
		t.Errorf("unregistered pair renders as %q (%q, %d)", k.String(), k.Namespace(), k.EntityID())
	}
	for _, v := range []int64{0, -1, 1 << 40, math.MinInt64, math.MaxInt64} {
		if k := lockcore.Int64(v); k.Int64() != v || k.EntityID() != v || k.Namespace() != "" {
			t.Errorf("Int64(%d) round trip = %d", v, k.Int64())
		}
	}
	if lockcore.Pair(0, 5) == lockcore.Int64(5) {
		t.Error("a pair key equals the one-bigint key with the same bits")
	}
}
