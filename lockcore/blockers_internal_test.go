package lockcore

import "testing"

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
