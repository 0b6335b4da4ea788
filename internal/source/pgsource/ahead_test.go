package pgsource

import (
	"reflect"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore/registry"
)

// buildWith writes the same rows into room allocated ahead as into an
// array of its own, whether the room holds them all (the room of the last
// poll's count), or too few (a table that grew: it allocates its own) or
// none (a Monitor's first poll).
func TestBuildIntoRoomAhead(t *testing.T) {
	table := mixedTable(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	reg := registry.Builtin()
	want := build(&table, reg)
	for _, last := range []int{0, 1, len(want.Locks) - 100, len(want.Locks), 4 * len(want.Locks)} {
		got := buildWith(&table, reg, &backends{}, <-rowsAhead(last))
		if !reflect.DeepEqual(got.Locks, want.Locks) {
			t.Errorf("room for %d rows ahead: the rows differ from build's", last)
		}
	}
}
