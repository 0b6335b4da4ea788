package ui

import (
	"errors"
	"reflect"
	"testing"

	"github.com/locktop/locktop/model"
)

// TestMergeSharesFirstSourceAlone: merge gives what model.Merge gives, and
// shares the first source's rows when no other source has any.
func TestMergeSharesFirstSourceAlone(t *testing.T) {
	pg := bigSnapshot(8)
	pg.Audit = []model.Audit{{Name: "pg"}}
	lease := model.Snapshot{Taken: t0, Ended: []model.SessionEnd{{PID: 7}}}
	withLease := lease
	withLease.Locks = []model.Lock{{Kind: model.KindLease, Name: "map:m1", Granted: true}}
	fromElsewhere := bigSnapshot(4)
	fromElsewhere.Locks[1].Source = 2
	for _, tc := range []struct {
		name  string
		parts []model.Part
		share bool
	}{
		{"first alone", []model.Part{{Name: "pg", Snapshot: pg}, {Name: "lease", Snapshot: lease}}, true},
		{"first alone, second failed", []model.Part{{Name: "pg", Snapshot: pg}, {Name: "lease", Snapshot: withLease, Err: errors.New("down")}}, true},
		{"both have locks", []model.Part{{Name: "pg", Snapshot: pg}, {Name: "lease", Snapshot: withLease}}, false},
		{"first failed", []model.Part{{Name: "pg", Snapshot: pg, Err: errors.New("down")}, {Name: "lease", Snapshot: withLease}}, false},
		{"first's rows carry a source", []model.Part{{Name: "pg", Snapshot: fromElsewhere}, {Name: "lease", Snapshot: lease}}, false},
		{"no locks", []model.Part{{Name: "pg", Snapshot: model.Snapshot{Taken: t0}}, {Name: "lease", Snapshot: lease}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := model.Merge(tc.parts)
			first := tc.parts[0].Snapshot.Locks
			got := merge(tc.parts)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("merge differs from model.Merge:\n got %+v\nwant %+v", got, want)
			}
			if shared := len(got.Locks) > 0 && &got.Locks[0] == &first[0]; shared != tc.share {
				t.Fatalf("rows shared: %v, want %v", shared, tc.share)
			}
		})
	}
}
