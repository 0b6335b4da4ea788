package ui

import (
	"strconv"
	"time"

	"github.com/locktop/locktop/model"
)

// The demo's shapes, as the embedded simulator's "steady" scenario shows
// them: twelve worker kinds, ten rates, locks held by "locktop.lock"
// connections and the events it sends, long details included. The screen
// tests at common sizes use them.

func demoStatus() model.SimStatus {
	s := simStatus()
	s.Agents = 200
	s.Rates = []model.Rate{
		{Name: "hooks/s", Value: 80}, {Name: "reaper cycles/s", Value: 2}, {Name: "reconciler cycles/s", Value: 2},
		{Name: "poller cycles/s", Value: 2}, {Name: "watchdog cycles/s", Value: 2}, {Name: "status/s", Value: 10},
		{Name: "config edits/s", Value: 2}, {Name: "skill injections/s", Value: 1}, {Name: "handoffs/s", Value: 0.5},
		{Name: "remote sends/s", Value: 1},
	}
	s.Workers = map[string]model.Counters{}
	for i, k := range []string{"config_editor", "deferred_stop", "handoff", "hook", "poller", "reaper",
		"reconciler", "remote", "skill_injector", "status", "summariser", "watchdog"} {
		s.Workers[k] = model.Counters{Attempts: int64(100 * (i + 1)), Acquired: int64(90 * (i + 1)), Skipped: int64(i)}
	}
	s.Invariants = nil
	for _, n := range []string{"no overlap", "exactly once", "no lost update", "one summary per turn", "one injection",
		"no config key lost", "no lock left", "no connection left", "fenced writes", "reconciled"} {
		s.Invariants = append(s.Invariants, model.Invariant{Name: n})
	}
	return s
}

// demoSnapshot is the hot agents of the demo: AGENT 1 held with four
// waiters, AGENT 3 and AGENT 109 held, every connection "locktop.lock".
func demoSnapshot() model.Snapshot {
	s := model.Snapshot{Taken: t0, Connections: 56, Interval: time.Second, NewWaits: 4, Latency: time.Millisecond}
	s.Locks = append(s.Locks, held(lock("AGENT", 1, 19190, "locktop.lock", true), 390*time.Millisecond))
	for i := range 4 {
		s.Locks = append(s.Locks, waiting(lock("AGENT", 1, int32(19194+i), "locktop.lock", false), i+1, time.Duration(238-50*i)*time.Millisecond, 19190))
	}
	s.Locks = append(s.Locks,
		held(lock("AGENT", 3, 19247, "locktop.lock", true), 34*time.Millisecond),
		held(lock("AGENT", 109, 19192, "locktop.lock", true), 22*time.Millisecond))
	for i := range s.Locks {
		s.Locks[i].Database, s.Locks[i].OwnBackend().User = "app", "postgres"
		s.Locks[i].OwnBackend().Query = "SELECT pg_advisory_lock($1::int4, $2::int4)"
	}
	return s
}

// demoEvents is one second of the demo's event stream, about 34 events:
// hooks acquiring the hot agents, background workers skipping them, the
// summariser skipping turns, deferred stops noting done commands.
func demoEvents(sec time.Time) []model.Event {
	var out []model.Event
	at := func(i int) time.Time { return sec.Add(time.Duration(i) * 29 * time.Millisecond) }
	hooks := []string{"pre_tool_use", "post_tool_use", "prompt_submit", "subagent_stop", "session_start"}
	for i := range 34 {
		var e model.Event
		switch i % 6 {
		case 0, 1, 2:
			e = model.Event{Worker: "hook", Outcome: model.OutcomeAcquired, Key: "AGENT " + strconv.Itoa(1+i%3),
				Wait: time.Duration(20+3*i) * time.Millisecond, Detail: hooks[i%len(hooks)]}
		case 3:
			e = model.Event{Worker: "summariser", Outcome: model.OutcomeSkipped, Key: "turn " + strconv.Itoa(100+i),
				Wait: time.Millisecond, Detail: "row locked by another transaction"}
		case 4:
			e = model.Event{Worker: []string{"watchdog", "poller", "reaper"}[i%3], Outcome: model.OutcomeSkipped,
				Key: "AGENT " + strconv.Itoa(1+i%3), Wait: 300 * time.Microsecond, PID: 19190}
		case 5:
			e = model.Event{Worker: "deferred_stop", Key: "AGENT " + strconv.Itoa(1+i%3),
				Detail: "command " + strconv.Itoa(120+i) + " already COMPLETE: skipped"}
		}
		e.Time = at(i)
		out = append(out, e)
	}
	return out
}
