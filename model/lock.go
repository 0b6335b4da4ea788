package model

import (
	"strconv"
	"time"

	"github.com/locktop/locktop/lockcore/registry"
)

// Kind says what sort of lock a Lock row describes. Only advisory locks exist
// today; the lease kinds are reserved for seeds 002 and 004 so that the UI,
// the JSON API and the metrics never assume every lock has a PostgreSQL pid.
type Kind string

// Lock kinds.
const (
	KindAdvisory   Kind = "advisory"    // pg_advisory_lock and friends
	KindLeasePG    Kind = "lease-pg"    // a lease row in a table (seed 004)
	KindLeaseRedis Kind = "lease-redis" // a Redis key with a TTL (seed 002)
)

// Advisory lock modes as pg_locks spells them.
const (
	ModeExclusive = "ExclusiveLock"
	ModeShare     = "ShareLock"
)

// Lock is one row of lock state: a holder or a waiter of one key.
type Lock struct {
	Kind Kind

	// Backend that holds or waits (advisory locks). Zero for lease locks.
	PID             int32
	Database        string
	User            string
	ApplicationName string
	ClientAddr      string
	State           string    // pg_stat_activity.state
	Query           string    // the backend's current or last statement
	QueryStart      time.Time // zero when unknown
	StateChange     time.Time // when State last changed; zero when unknown

	Mode    string // ExclusiveLock or ShareLock for advisory locks
	Granted bool

	// Key as a name: Namespace is the registry's name ("AGENT") or, for an
	// unregistered two-int key, the space as a decimal string; for a one-bigint
	// key it is the registered name of that fixed id or "". EntityID is the
	// signed id (two-int keys) or the signed 64-bit key (one-bigint keys).
	Namespace string
	EntityID  int64
	// Pair reports a two-int key (objsubid 2) rather than one bigint.
	Pair bool

	// WaitStart is when a waiter started waiting (pg_locks.waitstart).
	WaitStart time.Time
	// Waited is how long a waiter has waited, as of the snapshot.
	Waited time.Duration
	// HeldSince is a time the lock is known to have been held since: the
	// server does not record when an advisory lock was granted, so held times
	// are lower bounds. For a holder whose session is idle it is when the
	// session went idle (the lock was taken before that); a poller that
	// watches over time also uses when it first saw the grant. Zero when
	// nothing is known (a one-shot read of an active holder).
	HeldSince time.Time
	// Held is Taken-HeldSince for a granted lock, else zero.
	Held time.Duration
	// BlockedBy lists the holders of the same key in a conflicting mode. It
	// names holders only, never earlier waiters (unlike pg_blocking_pids).
	BlockedBy []int32
	// QueuePos is a waiter's place in its key's queue, 1 for the first, by
	// WaitStart; 0 for holders.
	QueuePos int

	// Lease locks (seeds 002, 004): the owner token and the lease left.
	Owner     string
	LeaseLeft time.Duration
}

// KeyID identifies a lock key across rows: two rows with equal KeyIDs are
// the same lock in the same database.
type KeyID struct {
	Kind      Kind
	Database  string
	Pair      bool
	Namespace string
	EntityID  int64
}

// KeyID returns the identity of the key this row is about.
func (l *Lock) KeyID() KeyID {
	return KeyID{Kind: l.Kind, Database: l.Database, Pair: l.Pair, Namespace: l.Namespace, EntityID: l.EntityID}
}

// KeyLabel renders the key for people: "AGENT 7", "IDEMPOTENCY_CLEANUP",
// "5 -3" for an unregistered pair, or the bare number for a one-bigint key
// (registry.AdvisoryLabel, the one key formatter).
func (l *Lock) KeyLabel() string { return registry.AdvisoryLabel(l.Namespace, l.EntityID, l.Pair) }

// Holder names the row's session: its pid, or a lease's owner. On a
// waiting row that is the waiter, which holds nothing: the holders it waits
// for are BlockedBy. (Label it "pid", not "holder", where rows of both
// kinds are shown.)
func (l *Lock) Holder() string {
	if l.PID != 0 {
		return strconv.Itoa(int(l.PID))
	}
	return l.Owner
}

// Snapshot is the lock state at one instant.
type Snapshot struct {
	// Taken is the server's clock when the snapshot was read.
	Taken time.Time
	// Locks are ordered by key, then holders before waiters, then by queue
	// position.
	Locks []Lock
	// Connections is the number of client backends on the server.
	Connections int
	// Latency is how long the poll took, round trip and decoding.
	Latency time.Duration
	// Interval is the time since the previous poll's Taken (0 for the first).
	Interval time.Duration
	// NewWaits counts waits that began since the previous poll.
	NewWaits int
}

// Counts returns how many rows hold and how many wait.
func (s *Snapshot) Counts() (held, waiting int) {
	for i := range s.Locks {
		if s.Locks[i].Granted {
			held++
		} else {
			waiting++
		}
	}
	return held, waiting
}
