package sim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/sim"
)

// Scenario deadlock makes cycles of waits across kinds (advisory and
// Redis, advisory and lease, Redis and lease), which no server sees; its
// watch, polling every source as the dashboard does, reports each one
// within two polls of forming, and the scenario checks that against its
// own count.
func TestDeadlockScenarioReportsEveryCycle(t *testing.T) {
	s := newSim(t, sim.Options{Scenario: "deadlock"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	// Two reported deadlocks of each pair of kinds, then stop.
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for seen["advisory+redis"] < 2 || seen["advisory+lease"] < 2 || seen["redis+lease"] < 2 {
		select {
		case e := <-s.Events():
			if e.Outcome == model.OutcomeDeadlock {
				seen[e.Key]++
			}
		case <-ctx.Done():
			t.Fatalf("deadlocks reported so far: %v", seen)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	r := s.Report()
	d := r.Deadlocks
	if d == nil {
		t.Fatal("no deadlock section in the report")
	}
	if !r.OK || d.Missed != 0 || d.Late != 0 || d.Unexpected != 0 || d.MaxPolls > 2 {
		t.Errorf("deadlocks %+v; invariants: %s", *d, broken(r))
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := "scenario deadlock: 6 processes making deadlocks, 3 goroutines"; !strings.Contains(text.String(), want) {
		t.Errorf("the report's first line lacks %q:\n%s", want, text.String())
	}
	for _, k := range []string{"advisory+redis", "advisory+lease", "redis+lease"} {
		if d.Made[k] < 2 {
			t.Errorf("%d %s cycles made, want at least 2", d.Made[k], k)
		}
	}
	if d.Checked < 6 || d.Reported < d.Checked {
		t.Errorf("%d checked, %d reported: every made cycle must be checked and reported", d.Checked, d.Reported)
	}
}

// The other scenarios, watched the same way, make no deadlock: the watch
// reports none (no false positive from sources read a moment apart, nor
// from two pods that each hold, from one goroutine, a conversation the
// other pod waits for from another: see waitfor's plausible).
func TestNoDeadlockElsewhere(t *testing.T) {
	for _, name := range []string{"steady", "all", "acf", "fole"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each waits on its watch's polls, not on the CPU
			s := newSim(t, sim.Options{Scenario: name, WatchDeadlocks: true})
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			// Work while the watch polls many times. Counted, not timed:
			// a loaded CI box makes few polls and few of acf's long turns
			// in a given time.
			waitStatus(t, "20 polls of the watch and 40 attempts", s, func(st model.SimStatus) bool {
				n := int64(0)
				for _, c := range st.Workers {
					n += c.Attempts
				}
				return n >= 40 && s.DeadlockPolls() >= 20
			})
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
			r := s.Report()
			d := r.Deadlocks
			if d == nil || d.Polls < 10 {
				t.Fatalf("the watch did not run: %+v", d)
			}
			if d.Reported != 0 || !r.OK {
				t.Errorf("%d deadlocks reported in %s, none made; invariants: %s", d.Reported, name, broken(r))
			}
		})
	}
}
