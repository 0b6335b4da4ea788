package ui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// A row whose session ended reads as such in the event log, live and in a
// replay of a recording (both diff the snapshots): 4242 was terminated by
// locktop while holding AGENT 7, 4603 ended while waiting. They read
// "released" and "left the queue" before.
func TestDiffEventsEndedSessions(t *testing.T) {
	prev := sample()
	next := sample()
	next.Taken = t0.Add(time.Second)
	next.Locks = slices.DeleteFunc(next.Locks, func(l model.Lock) bool { return l.PID == 4242 || l.PID == 4603 })
	next.Ended = []model.SessionEnd{{PID: 4242, Cause: model.EndTerminated, By: model.ByLocktop}, {PID: 4603, Cause: model.EndEnded}}
	got := map[int32]model.Event{}
	for _, e := range diffEvents(&prev, &next) {
		got[e.PID] = e
	}
	if e := got[4242]; e.Outcome != outcomeEnded || !strings.HasPrefix(e.Detail, "terminated by locktop") {
		t.Errorf("4242: %+v, want ended, terminated by locktop", e)
	}
	if e := got[4603]; e.Outcome != outcomeEnded || e.Detail != "session ended" {
		t.Errorf("4603: %+v, want ended, session ended", e)
	}
}
