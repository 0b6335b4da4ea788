package pglocks

import (
	"testing"

	"github.com/locktop/locktop/lockcore"
)

// The conflict table is symmetric, as the manual's is, and an unknown
// mode conflicts with every mode.
func TestConflictTable(t *testing.T) {
	for a := range conflictTable {
		for b := range conflictTable {
			if ab, ba := conflictTable[a]&(1<<b) != 0, conflictTable[b]&(1<<a) != 0; ab != ba {
				t.Errorf("modes %d and %d: %v one way, %v the other", a, b, ab, ba)
			}
		}
		if conflictTable[a]&1 == 0 {
			t.Errorf("mode %d does not conflict with an unknown mode", a)
		}
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"AccessShareLock", "ShareLock", false},
		{"RowExclusiveLock", "ShareLock", true},
		{"ShareLock", "ShareLock", false},
		{"ShareUpdateExclusiveLock", "ShareUpdateExclusiveLock", true},
		{"ShareLock", "ExclusiveLock", true},
		{"AccessShareLock", "AccessExclusiveLock", true},
		{"RowShareLock", "RowExclusiveLock", false},
		{"SIReadLock", "AccessShareLock", true},
	} {
		if got := conflictTable[modeNumber(c.a)]&(1<<modeNumber(c.b)) != 0; got != c.want {
			t.Errorf("%s vs %s: conflict %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestKeyFromLockRow(t *testing.T) {
	for _, tc := range []struct {
		key            lockcore.Key
		classid, objid uint32
		objsubid       int16
	}{
		{lockcore.Pair(1, 7), 1, 7, 2},
		{lockcore.Pair(-5, -7), 0xfffffffb, 0xfffffff9, 2},
		{lockcore.Pair(-2147483648, 2147483647), 0x80000000, 0x7fffffff, 2},
		{lockcore.Int64(42424242), 0, 42424242, 1},
		{lockcore.Int64(-1), 0xffffffff, 0xffffffff, 1},
		{lockcore.Int64(-9223372036854775808), 0x80000000, 0, 1},
		{lockcore.HashKey(""), 0xffffffff, uint32(lockcore.FNV1a32("")), 1},
	} {
		got, ok := keyFromLockRow(tc.classid, tc.objid, tc.objsubid)
		if !ok || got != tc.key {
			t.Errorf("keyFromLockRow(%#x, %#x, %d) = %v, %v; want %v", tc.classid, tc.objid, tc.objsubid, got, ok, tc.key)
		}
	}
	if _, ok := keyFromLockRow(1, 2, 0); ok {
		t.Error("objsubid 0 decoded as an advisory key")
	}
}
