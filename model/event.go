package model

import (
	"strconv"
	"time"
)

// Outcome is what happened to one lock attempt or one worker step.
type Outcome string

// Outcomes of lock attempts, as the simulator and the lock core report them.
const (
	OutcomeAcquired  Outcome = "acquired"  // got the lock (Wait tells how long it waited)
	OutcomeSkipped   Outcome = "skipped"   // try-lock found it held and moved on
	OutcomeTimeout   Outcome = "timeout"   // gave up after the lock timeout
	OutcomeReentrant Outcome = "reentrant" // refused: the key is already held in this context
	OutcomePhantom   Outcome = "phantom"   // a failed acquire had in fact been granted; unlocked
	OutcomeCanceled  Outcome = "canceled"  // the caller's context ended the wait
	OutcomeError     Outcome = "error"     // anything else that went wrong
	OutcomeLost      Outcome = "lost"      // the lock's session ended while it was held
	OutcomeViolation Outcome = "violation" // an invariant check failed
	OutcomeDeadlock  Outcome = "deadlock"  // a cycle of waits seen in two consecutive polls (model/waitfor)
)

// Event is one thing that happened, for the event log and the event stream.
type Event struct {
	Time    time.Time
	Worker  string // worker kind, e.g. "hook", "reaper"
	Outcome Outcome
	Key     string        // key label, e.g. "AGENT 7"
	Wait    time.Duration // time spent waiting for the lock
	PID     int32         // backend involved, when known (e.g. the holder that caused a skip); PIDText says it

	Detail string
	// Contained marks a lost lock whose section did no harm: the fence
	// refused its late write, or it stopped at the loss. That is the
	// design at work (a scenario's forgotten extend, an injected crash),
	// shown but not raised as an alarm.
	Contained bool
}

// Counters are cumulative per worker kind.
type Counters struct {
	Attempts  int64 `json:"attempts"`
	Acquired  int64 `json:"acquired"`
	Skipped   int64 `json:"skipped"`
	Timeouts  int64 `json:"timeouts"`
	Reentrant int64 `json:"reentrant"`
	Errors    int64 `json:"errors"`
	// Lost counts locks lost while held (their session ended), apart from
	// Errors.
	Lost int64 `json:"lost"`
}

// Add returns the sum of c and o.
func (c Counters) Add(o Counters) Counters {
	return Counters{
		Attempts:  c.Attempts + o.Attempts,
		Acquired:  c.Acquired + o.Acquired,
		Skipped:   c.Skipped + o.Skipped,
		Timeouts:  c.Timeouts + o.Timeouts,
		Reentrant: c.Reentrant + o.Reentrant,
		Errors:    c.Errors + o.Errors,
		Lost:      c.Lost + o.Lost,
	}
}

// PIDText says what an event's PID is, for people: on a skip the holder
// that caused it ("held by pid 4242"), otherwise the backend involved
// ("pid 4242"); "" without one. It is written here once, so that whoever
// shows an event never writes the pid twice ("pid 5049 · held by pid
// 5049").
func PIDText(o Outcome, pid int32) string {
	switch {
	case pid == 0:
		return ""
	case o == OutcomeSkipped:
		return "held by pid " + strconv.Itoa(int(pid))
	}
	return "pid " + strconv.Itoa(int(pid))
}
