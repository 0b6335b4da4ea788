package lease

import (
	"slices"
	"time"

	"github.com/locktop/locktop/internal/leasedb"
)

// This file holds the rules every store applies the same way: what an
// attempt on a resource may do given the resource's rows, read under the
// resource's row lock with the database's clock. Stores only read the state
// and write the verdict.

// holder is one grant's row as an attempt reads it.
type holder struct {
	token        string
	owner        string
	mode         Mode
	fence        int64
	leaseExpires time.Time
	heartbeat    time.Time
	jobActive    bool // a running job whose own lease has not passed, queued before the grant, claims it
}

// stale is seed 004 §3.3's rule (leasedb.Stale, which listings apply
// too): lease passed, heartbeat older than grace, no active job claiming
// the owner.
func (h holder) stale(now time.Time, grace time.Duration) bool {
	return leasedb.Stale(now, h.leaseExpires, h.heartbeat, grace, h.jobActive)
}

// waiter is one waiting request's row.
type waiter struct {
	id      string
	mode    Mode
	expires time.Time
}

// state is what an attempt reads of one resource.
type state struct {
	now     time.Time // the database's clock
	fence   int64     // the last fence minted for the resource
	holders []holder
	waiters []waiter
}

// request is one attempt: a new grant, or an upgrade of the grant token.
type request struct {
	mode     Mode // wanted; Write for an upgrade
	upgrade  bool
	token    string // the upgrading grant
	waiterID string // the request's own waiter row, if it has one
	grace    time.Duration
}

// verdict is what the attempt may do.
type verdict struct {
	grant   bool
	victims []holder // stale conflicting holders the grant removes, each audited
	// byWaiter: refused only because a writer waits ahead (writer
	// precedence), not because of a holder.
	byWaiter bool
	lost     bool // an upgrade whose own row is gone
}

// decide applies the compatibility matrix, stale recovery and writer
// precedence to one attempt.
//
// A conflicting holder blocks unless it is stale; stale conflicting holders
// are taken over (any takeover of a lapsed lease is a stale recovery). A
// new read or upgradeable request also waits behind any live writer waiter
// (an upgrade in progress counts as one), so a stream of readers cannot
// starve a writer: DistributedLock's "writers are given precedence over
// readers".
func decide(s *state, q request) verdict {
	var v verdict
	if q.upgrade {
		// The grant must still be there, and its lease not passed: a lease
		// that has passed is over (no heartbeat can renew it either).
		v.lost = !slices.ContainsFunc(s.holders, func(h holder) bool {
			return h.token == q.token && h.leaseExpires.After(s.now)
		})
		if v.lost {
			return v
		}
	}
	for _, h := range s.holders {
		if h.token == q.token || compatible(h.mode, q.mode) {
			continue
		}
		if !h.stale(s.now, q.grace) {
			return verdict{}
		}
		v.victims = append(v.victims, h)
	}
	if !q.upgrade && q.mode != Write {
		for _, w := range s.waiters {
			if w.id != q.waiterID && w.mode == Write && w.expires.After(s.now) {
				return verdict{byWaiter: true}
			}
		}
	}
	v.grant = true
	return v
}

// staleHolders returns every stale holder of the resource: what an explicit
// RecoverStale removes.
func staleHolders(s *state, grace time.Duration) []holder {
	var out []holder
	for _, h := range s.holders {
		if h.stale(s.now, grace) {
			out = append(out, h)
		}
	}
	return out
}

// deadWaiters returns the ids of waiter rows whose owners stopped renewing
// them (a process that died waiting): rows to purge.
func deadWaiters(s *state) []string {
	var out []string
	for _, w := range s.waiters {
		if !w.expires.After(s.now) {
			out = append(out, w.id)
		}
	}
	return out
}
