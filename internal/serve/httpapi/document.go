package httpapi

import (
	"math"
	"time"

	"github.com/locktop/locktop/model"
)

// Document is the body of GET /api/advisory-locks, seed 000's document:
// advisory locks only (every other kind is in LocksDocument, GET
// /api/locks).
type Document struct {
	// Taken is the server's clock when the lock table was read.
	Taken time.Time `json:"taken"`
	// Total is len(Locks): holders and waiters.
	Total   int `json:"total"`
	Held    int `json:"held"`
	Waiting int `json:"waiting"`
	// Connections is the number of client backends on the server.
	Connections int `json:"connections"`
	// Warning says what the monitor's role cannot see (no pg_monitor).
	Warning string `json:"warning,omitempty"`
	// Locks are grouped by key, holders first, then waiters in queue order.
	Locks []Lock `json:"locks"`
	// Age is how old the lock table is as served, in seconds, by the
	// serving process's clock: the time since its poll finished (0 for
	// `locktop snapshot`, which polls once).
	Age float64 `json:"age"`
	// Stale is true when a newer lock table was due but the database did
	// not deliver it (it failed, or did not answer within StaleWait): the
	// table is the newest there is, Age old. StaleReason says why.
	Stale       bool   `json:"stale"`
	StaleReason string `json:"stale_reason,omitempty"`
}

// Lock is one holder or waiter of an advisory lock. Times are RFC 3339,
// durations are seconds as numbers. Fields a row does not have are null
// (pid for a prepared transaction's lock, wait_start for holders) rather
// than absent.
type Lock struct {
	// Kind is "advisory".
	Kind string `json:"kind"`
	// Key is the key as people read it: "AGENT 7", "IDEMPOTENCY_CLEANUP",
	// "5 -3" for an unregistered pair, or the bare number of a one-bigint key.
	Key string `json:"key"`
	// Namespace is the registry's name, an unregistered space as a number,
	// or "" for an unregistered one-bigint key.
	Namespace string `json:"namespace"`
	EntityID  int64  `json:"entity_id"`
	// PID is the backend that holds or waits; null when there is none (a
	// prepared transaction's lock).
	PID *int32 `json:"pid"`
	// Holder names who holds the lock on a holding row: its pid as a
	// string. It is null on a waiting row, whose own pid is PID and whose
	// holders are BlockedBy.
	Holder          *string    `json:"holder"`
	Database        string     `json:"database"`
	User            string     `json:"user"`
	ApplicationName string     `json:"application_name"`
	ClientAddr      string     `json:"client_addr"`
	State           string     `json:"state"`
	Query           string     `json:"query"`
	QueryStart      *time.Time `json:"query_start"`
	Mode            string     `json:"mode"`
	Granted         bool       `json:"granted"`
	// Duration is seed 000's now() - query_start in seconds: for a lock
	// connection, whose last statement is the lock, the wait plus the hold so
	// far; for a waiter, its wait. Held or Waited when there is no backend.
	Duration float64 `json:"duration"`
	// HeldSince is a time the lock is known to have been held since: the
	// server does not record grant times, so held times are lower bounds
	// (the earliest of: for an idle holder, since its session went idle;
	// for a holder that blocks a waiter, since that waiter began waiting;
	// over polls, since the monitor first saw the grant). Null when nothing
	// is known.
	HeldSince *time.Time `json:"held_since"`
	Held      float64    `json:"held"`
	// XactStart is when the backend's transaction began: a lock taken by
	// the transaction is held at most since then (a session-level advisory
	// lock can be older). Null outside a transaction.
	XactStart *time.Time `json:"xact_start"`
	// WaitStart is when a waiter began to wait (pg_locks.waitstart).
	WaitStart *time.Time `json:"wait_start"`
	Waited    float64    `json:"waited"`
	// QueuePosition is a waiter's place in its key's queue (1 first); 0 for
	// holders.
	QueuePosition int `json:"queue_position"`
	// BlockedBy lists the pids of the holders this waiter waits for; never
	// null.
	BlockedBy []int32 `json:"blocked_by"`
}

// NewDocument turns a snapshot's advisory locks into seed 000's document
// (the snapshot's other kinds are left out: see NewLocksDocument). info
// supplies the warning about what the monitor's role cannot see.
func NewDocument(s model.Snapshot, info model.ServerInfo) Document {
	d := Document{
		Taken:       s.Taken,
		Connections: s.Connections,
		Warning:     info.Warning,
		Locks:       make([]Lock, 0, len(s.Locks)),
	}
	for i := range s.Locks {
		l := &s.Locks[i]
		if l.Kind != model.KindAdvisory && l.Kind != "" {
			continue
		}
		if l.Granted {
			d.Held++
		} else {
			d.Waiting++
		}
		d.Locks = append(d.Locks, newLock(l, s.Now(l)))
	}
	d.Total = len(d.Locks)
	return d
}

func newLock(l *model.Lock, taken time.Time) Lock {
	kind := l.Kind
	if kind == "" {
		kind = model.KindAdvisory
	}
	out := Lock{
		Kind:            string(kind),
		Key:             l.KeyLabel(),
		Namespace:       l.Namespace,
		EntityID:        l.EntityID,
		Database:        l.Database,
		User:            l.Session().User,
		ApplicationName: l.Session().ApplicationName,
		ClientAddr:      l.Session().ClientAddr,
		State:           l.Session().State,
		Query:           l.Session().Query,
		QueryStart:      timePtr(l.Session().QueryStart),
		Mode:            l.Mode,
		Granted:         l.Granted,
		HeldSince:       timePtr(l.HeldSince),
		Held:            seconds(l.Held(taken)),
		XactStart:       timePtr(l.Session().XactStart),
		WaitStart:       timePtr(l.WaitStart),
		Waited:          seconds(l.Waited(taken)),
		QueuePosition:   l.QueuePos,
		BlockedBy:       append(make([]int32, 0, len(l.BlockedBy)), l.BlockedBy...),
	}
	if l.PID != 0 {
		pid := l.PID
		out.PID = &pid
	}
	if l.Granted {
		out.WaitStart = nil
		holder := l.Holder()
		out.Holder = &holder
	}
	// Seed 000's duration: now() - query_start. For a lock connection, whose
	// last statement is the lock itself, that is the wait plus the hold so
	// far; for a waiter, its wait. Without a backend, the held or waited time.
	switch {
	case !l.Session().QueryStart.IsZero() && !taken.IsZero():
		out.Duration = seconds(max(taken.Sub(l.Session().QueryStart), 0))
	case l.Granted:
		out.Duration = out.Held
	default:
		out.Duration = out.Waited
	}
	return out
}

// seconds renders a duration as seconds, to the microsecond.
func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e6 }

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
