package locktest

import (
	"fmt"
	"testing"

	"github.com/locktop/locktop/lockcore"
)

// crashFences: fences strictly increase across a crash of the store. The
// fence of a grant whose commit the crash lost would be handed out again
// (issue 32: 2, 3, 4 after 1..6 on a server committing asynchronously), so
// each round is one grant, a checkpoint (the durable state the crash goes
// back to), five grants, the crash, and three grants. There are two
// rounds, one by Acquire on a holder and one by TryAcquire on another,
// since a kind may mint fences on different paths (statements, pools).
func crashFences(t *testing.T, st CrashStore) []string {
	n := name("crash")
	a, b := st.Locker(t), st.Locker(t)
	var fences []int64
	check := func(f int64, what string) {
		t.Helper()
		if len(fences) > 0 && f <= fences[len(fences)-1] {
			t.Fatalf("%s: fence %d not above the earlier ones %v", what, f, fences)
		}
		fences = append(fences, f)
	}
	for _, r := range []struct {
		l   Locker
		try bool
	}{{a, false}, {b, true}} {
		round := "Acquire"
		if r.try {
			round = "TryAcquire"
		}
		step := func(count int, when string) {
			t.Helper()
			what := fmt.Sprintf("%s: grant %s", round, when)
			for range count {
				f, err := grant(t, r.l, n, r.try)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				check(f, what)
			}
		}
		step(1, "before the checkpoint")
		st.Checkpoint(t)
		step(5, "after the checkpoint")
		for _, f := range st.Crash(t, n) {
			check(f, round+": a grant of the crashed process")
		}
		step(3, "after the crash")
	}
	t.Logf("fences %v", fences)
	return []string{n}
}

// grant takes name with l, by Acquire or TryAcquire, releases it and
// returns the grant's fence.
func grant(t *testing.T, l Locker, name string, try bool) (int64, error) {
	var h lockcore.Hold
	var err error
	if try {
		h, err = l.TryAcquire(ctxT(t), name)
	} else {
		h, err = l.Acquire(ctxT(t), name)
	}
	if err != nil {
		return 0, err
	}
	return h.Fence(), h.Release(ctxT(t))
}
