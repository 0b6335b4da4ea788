//go:build attack

package recording

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// Attack tests (bp11) on the writer's last locks not being copied when a
// snapshot is stored as the last one was (c97e182). The promise: the
// recording reads back every snapshot as it was written, whatever changed
// between two writes (a field, the order, a change and its undoing, a
// keyframe boundary), and whether the caller hands a fresh array or the
// last one's again.

// snapJSON is s as it was when written: what reading it back must give.
func snapJSON(t *testing.T, s model.Snapshot) model.Snapshot {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out model.Snapshot
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// readBack writes snaps (each as it is at its write, the caller mutating
// its arrays between writes as mutate says) and compares each step read
// back with what was written.
func checkRoundTrip(t *testing.T, keyEvery int, steps int, next func(i int) model.Snapshot) {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, KeyframeEvery: keyEvery})
	if err != nil {
		t.Fatal(err)
	}
	var want []model.Snapshot
	for i := range steps {
		s := next(i)
		want = append(want, snapJSON(t, s))
		if err := w.Write(0, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != len(want) {
		t.Fatalf("%d steps read back, %d written", r.Len(), len(want))
	}
	for i := range want {
		got, err := r.At(i)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "step "+itoa(i), got[0], want[i])
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// Random changes between writes, each kind often enough to meet the
// others: nothing, a field of one row (stored), a row changed and changed
// back, two rows swapped, a row added or dropped, a new session value;
// with fresh arrays each write, and with the caller's one array written
// again after changing it in place.
func TestAttackRecordRandomChanges(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		for _, keyEvery := range []int{1, 2, 3, 7, 0} {
			for seed := range uint64(3) {
				rng := rand.New(rand.NewPCG(seed, 11))
				base := newSynth(12).step(time.Second, 0).Locks
				cur := slices.Clone(base)
				taken := t0
				checkRoundTrip(t, keyEvery, 60, func(int) model.Snapshot {
					taken = taken.Add(time.Second)
					if !reuse {
						cur = slices.Clone(cur)
					}
					switch op := rng.IntN(10); {
					case op < 3: // at rest
					case op == 3 && len(cur) > 0:
						i := rng.IntN(len(cur))
						cur[i].Mode = []string{model.ModeShare, model.ModeExclusive}[rng.IntN(2)]
					case op == 4 && len(cur) > 0:
						i := rng.IntN(len(cur))
						cur[i].Granted = !cur[i].Granted
						cur[i].QueuePos = rng.IntN(3)
					case op == 5 && len(cur) > 1:
						i, j := rng.IntN(len(cur)), rng.IntN(len(cur))
						cur[i], cur[j] = cur[j], cur[i]
					case op == 6 && len(cur) > 0:
						i := rng.IntN(len(cur))
						cur[i].BlockedBy = []int32{int32(rng.IntN(5))}
					case op == 7 && len(cur) > 0:
						i := rng.IntN(len(cur))
						b := *cur[i].Session()
						b.Query = "SELECT " + itoa(rng.IntN(4))
						cur[i].Backend = &b
					case op == 8 && len(cur) > 1:
						i := rng.IntN(len(cur))
						cur = slices.Delete(cur, i, i+1)
					default:
						cur = append(cur, base[rng.IntN(len(base))])
					}
					return model.Snapshot{Taken: taken, Connections: 9, Locks: cur}
				})
			}
		}
	}
}

// A row changed and changed back, and a snapshot stored as the last one
// was, around keyframes: A, A, B, A, A, B, B, A.
func TestAttackRecordChangedBack(t *testing.T) {
	a := newSynth(5).step(time.Second, 0).Locks
	b := slices.Clone(a)
	b[2].Mode = model.ModeShare
	seq := [][]model.Lock{a, a, b, a, slices.Clone(a), b, slices.Clone(b), a}
	for _, keyEvery := range []int{1, 2, 3, 4, 0} {
		checkRoundTrip(t, keyEvery, len(seq), func(i int) model.Snapshot {
			return model.Snapshot{Taken: t0.Add(time.Duration(i) * time.Second), Locks: seq[i]}
		})
	}
}

// A caller that recycles its rows' blocker arrays two polls later (one
// array for the polls of even number, one for the odd): each written
// snapshot's rows are untouched until the next write has returned, but
// the writer must not keep an older snapshot's arrays as the last locks.
func TestAttackRecordRecycledTwoWritesLater(t *testing.T) {
	base := newSynth(5).step(time.Second, 0).Locks
	bufs := [2][]int32{{7}, {7}}
	// Blockers by step: the same twice (stored alike, not copied), then
	// another held in the first step's recycled array.
	by := []int32{7, 7, 8, 8}
	checkRoundTrip(t, 0, len(by), func(i int) model.Snapshot {
		arr := bufs[i%2]
		arr[0] = by[i]
		locks := slices.Clone(base)
		for j := range locks {
			if !locks[j].Granted {
				locks[j].BlockedBy = arr
			}
		}
		return model.Snapshot{Taken: t0.Add(time.Duration(i) * time.Second), Locks: locks}
	})
}

// Two sources written in turn, each with its own last locks: one at rest
// while the other changes, the same rows handed to both.
func TestAttackRecordTwoSourcesInTurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	base := newSynth(8).step(time.Second, 0).Locks
	cur := [2][]model.Lock{slices.Clone(base), slices.Clone(base)}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL", "Redis"}, Start: t0, Interval: time.Second, KeyframeEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	type written struct {
		src  int
		snap model.Snapshot
	}
	var want []written
	for i := range 80 {
		src := rng.IntN(2)
		if rng.IntN(2) == 0 {
			c := slices.Clone(cur[src])
			j := rng.IntN(len(c))
			c[j].QueuePos = rng.IntN(3)
			if rng.IntN(3) == 0 {
				c = slices.Clone(cur[1-src]) // the other source's rows
			}
			cur[src] = c
		}
		s := model.Snapshot{Taken: t0.Add(time.Duration(i) * time.Second), Locks: cur[src]}
		want = append(want, written{src, snapJSON(t, s)})
		if err := w.Write(src, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Read(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range want {
		got, err := r.At(i)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "step "+itoa(i), got[x.src], x.snap)
	}
}
