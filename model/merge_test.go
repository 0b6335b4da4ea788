package model_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// TestMergeSharesFirstSourceAlone: Merge gives what copying every part's
// rows gives, and shares the first source's rows when no other source has
// any (they were shared by a special case in ui before Merge did).
func TestMergeSharesFirstSourceAlone(t *testing.T) {
	pg := rows(8)
	pg.Audit = []model.Audit{{Name: "pg"}}
	lease := model.Snapshot{Taken: t0, Ended: []model.SessionEnd{{PID: 7}}}
	withLease := lease
	withLease.Locks = []model.Lock{{Kind: model.KindLease, Name: "map:m1", Granted: true}}
	fromElsewhere := rows(4)
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
			want := copied(tc.parts)
			first := tc.parts[0].Snapshot.Locks
			got := model.Merge(tc.parts)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Merge differs from copying every part:\n got %+v\nwant %+v", got, want)
			}
			if shared := len(got.Locks) > 0 && &got.Locks[0] == &first[0]; shared != tc.share {
				t.Fatalf("rows shared: %v, want %v", shared, tc.share)
			}
		})
	}
}

// copied is Merge of parts whose lock slices are copies: what Merge gives
// when it shares nothing, as a reference.
func copied(parts []model.Part) model.Snapshot {
	ps := slices.Clone(parts)
	for i := range ps {
		ps[i].Snapshot.Locks = slices.Clone(ps[i].Snapshot.Locks)
	}
	return model.Merge(ps)
}

var t0 = time.Date(2026, 3, 14, 15, 4, 5, 0, time.UTC)

// rows is a snapshot of n held advisory locks of n sessions.
func rows(n int) model.Snapshot {
	s := model.Snapshot{Taken: t0, Connections: 300, Interval: time.Second}
	for i := range n {
		s.Locks = append(s.Locks, model.Lock{Kind: model.KindAdvisory, PID: int32(10000 + i), Mode: model.ModeExclusive, Granted: true, Namespace: "AGENT", EntityID: int64(i)})
	}
	return s
}
