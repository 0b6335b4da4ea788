package lockcore

import (
	"strconv"
	"time"
)

// EventKind says what an Event reports.
type EventKind int

// Event kinds, in the order a lock's life produces them.
const (
	EventAttempt   EventKind = iota + 1 // an acquire or try began
	EventAcquired                       // the lock was granted (Wait says after how long)
	EventSkipped                        // a try found the key held elsewhere
	EventTimeout                        // an acquire gave up: ErrTimeout
	EventReentrant                      // refused: the key is held in the caller's context
	EventCanceled                       // the caller's context ended the wait
	EventFailed                         // another error ended the attempt (Err says which)
	EventPhantom                        // a failed acquire had in fact been granted, and was unlocked (bug #17686)
	EventReleased                       // the lock was released (Held says after how long)
	EventLost                           // the lock's session ended while it was held (reported when seen, before Release)
)

var eventNames = [...]string{
	EventAttempt: "attempt", EventAcquired: "acquired", EventSkipped: "skipped",
	EventTimeout: "timeout", EventReentrant: "reentrant", EventCanceled: "canceled",
	EventFailed: "failed", EventPhantom: "phantom", EventReleased: "released", EventLost: "lost",
}

func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one step in a lock's life, given to every observer.
type Event struct {
	Kind     EventKind
	Key      Key
	Blocking bool          // from With/Acquire, not TryWith
	Wait     time.Duration // time from the attempt to this event (acquire side)
	Held     time.Duration // time the lock was held (EventReleased, EventLost)
	PID      uint32        // backend of the lock connection, when one was used
	Err      error         // EventFailed, EventTimeout, EventCanceled, EventLost (wraps ErrLost)
}

// Observer receives events synchronously, on the goroutine of the lock call
// (EventLost on the goroutine that watches the lock), so it must be quick
// and safe for concurrent use. Metrics and event streams are observers.
type Observer func(Event)
