package leasedb

import (
	"cmp"
	"errors"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/lockcore/registry"
)

// ErrNoSchema means the database has no lease tables: nothing has used
// lease locks there yet.
var ErrNoSchema = errors.New("no lease tables in this database")

// Listing is everything a listing reads at one moment.
type Listing struct {
	Now     time.Time // the database's clock
	Entries []Entry   // by resource in lock order; holders, then waiters by since
	Jobs    []Job     // by arrival
	Audit   []Audit   // newest first, at most AuditListed
}

// AuditListed is how many audit records a Listing carries.
const AuditListed = 100

// lastSize is the number of entries of the last listing read: the next one
// starts with room for as many, rather than growing a listing of thousands
// of 200-byte entries through a dozen copies (half of a poll's allocation).
var lastSize atomic.Int64

func newListing() *Listing {
	if l, ok := spare.Get().(*Listing); ok {
		return l
	}
	return &Listing{Entries: make([]Entry, 0, lastSize.Load())}
}

// spare keeps listings handed back with Recycle: a monitor that polls
// every second would otherwise drop one of 1,000 200-byte entries a poll
// for the collector.
var spare sync.Pool

// Recycle hands l back for a later read to fill, once its reader has
// copied out what it keeps (strings may be kept: they are never
// overwritten). Neither l nor its slices may be used after.
func (l *Listing) Recycle() {
	clear(l.Entries) // drop the strings' references until the next read
	*l = Listing{Entries: l.Entries[:0]}
	spare.Put(l)
}

// Entry is one holder (a dal_locks row) or waiter (a dal_waiters row).
type Entry struct {
	LockID  string
	Level   string // the lock_id's registry LeaseLevel name ("MAP"); "" if it fits none
	Mode    string // as stored: "read", "write", "upgradeable"
	Owner   string
	Granted bool  // a holder; false: a waiter
	Fence   int64 // holders only
	// LeaseExpires is when a holder's lease passes, or when a waiter's row
	// lapses unless the waiter retries.
	LeaseExpires time.Time
	Heartbeat    time.Time // the last heartbeat (holders) or retry (waiters)
	Since        time.Time // granted (holders) or began waiting (waiters)
	LeaseLeft    time.Duration
	HeartbeatAge time.Duration
	Position     int    // a waiter's place among the resource's waiters (1 first); 0 for holders
	Metadata     string // a holder's metadata column, JSON text
	// Stale: a holder a Manager with the Grace recorded in its row would
	// recover (see Stale).
	Stale bool
	rank  int64 // the level's place in the lock order
}

// Job is a dal_jobs row.
type Job struct {
	ID, Owner, Project, Map, Kind, Process string
	Running                                bool
	Seq                                    int64
	Queued, Started                        time.Time // Started is zero while queued
	LeaseExpires, Heartbeat                time.Time
}

// Audit is a dal_audit row: one stale recovery.
type Audit struct {
	LockID, Actor, Reason, VictimOwner, VictimMode string
	VictimFence, Fence                             int64
	At                                             time.Time
}

// Stale is seed 004 §3.3's rule: a holder may be recovered only when its
// lease has passed, its heartbeat is older than grace, and no active job
// claims its owner. (The fourth condition, the audit record, is the
// store's: written in the transaction that removes the holder.)
func Stale(now, leaseExpires, heartbeat time.Time, grace time.Duration, jobActive bool) bool {
	return now.After(leaseExpires) && now.Sub(heartbeat) > grace && !jobActive
}

// schemaName is what a PostgreSQL schema of lease tables may be called:
// it is inlined in the statements, never quoted.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// ValidSchema reports whether schema may name the lease tables' schema.
func ValidSchema(schema string) bool { return schemaName.MatchString(schema) }

// holder builds a holder's entry; grace is the one its row records.
func holder(lockID, mode, owner string, fence int64, expires, beat, granted time.Time, grace time.Duration, md string, jobActive bool, now time.Time) Entry {
	return Entry{LockID: lockID, Mode: mode, Owner: owner, Granted: true, Fence: fence, LeaseExpires: expires,
		Heartbeat: beat, Since: granted, Metadata: md, Stale: Stale(now, expires, beat, grace, jobActive)}
}

// finish completes a listing: each entry's level, the order (by resource
// in lock order: level, then lock_id; holders first; then by since), the
// ages by the database's clock and the waiters' positions.
func (l *Listing) finish() {
	lastSize.Store(int64(len(l.Entries)))
	for i := range l.Entries {
		e := &l.Entries[i]
		if m, ok := registry.Match(registry.LeaseLevel, e.LockID); ok {
			e.Level, e.rank = m.Name, m.ID
		}
	}
	// Sorted by index, then moved once: an Entry is 200 bytes, and a
	// listing has thousands of them.
	order := make([]int32, len(l.Entries))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int {
		a, b := &l.Entries[i], &l.Entries[j]
		if c := cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.LockID, b.LockID)); c != 0 {
			return c
		}
		if a.Granted != b.Granted {
			if a.Granted {
				return -1
			}
			return 1
		}
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(i, j)) // stable
	})
	// Apply the permutation in place, cycle by cycle: position i takes the
	// entry at order[i]; order[i] = i marks it done.
	for i := range order {
		if order[i] == int32(i) {
			continue
		}
		tmp, j := l.Entries[i], int32(i)
		for order[j] != int32(i) {
			k := order[j]
			l.Entries[j], order[j] = l.Entries[k], j
			j = k
		}
		l.Entries[j], order[j] = tmp, j
	}
	pos := 0
	for i := range l.Entries {
		e := &l.Entries[i]
		e.LeaseLeft, e.HeartbeatAge = e.LeaseExpires.Sub(l.Now), l.Now.Sub(e.Heartbeat)
		switch {
		case e.Granted:
			pos = 0
		case i > 0 && !l.Entries[i-1].Granted && l.Entries[i-1].LockID == e.LockID:
			pos++
			e.Position = pos
		default:
			pos = 1
			e.Position = pos
		}
	}
}
