package lease

import "time"

// A lock whose lease runs out with no heartbeat renewing it is lost at its
// local deadline: its context is cancelled then, not only when Err is next
// called. One timer per Manager watches every lock's deadline, rather than
// one per lock: arming a timer costs a lock cycle more than the rest of
// the Manager's bookkeeping (a new earliest timer wakes the runtime's
// network poller, a futex call and a thread woken on another core), and
// most locks are released long before their lease runs out.
//
// The timer is armed no later than the earliest deadline of the locks
// tracked (armExpiry), and is not stopped when a lock is released: a lock
// taken after has a later deadline (every grant's lease is the Manager's
// Lease, counted from when its request was sent), so a Manager that takes
// and releases lock after lock arms the timer once a Lease, when it fires
// and finds nothing, not once a lock. A renewal only moves a deadline
// later: the timer then fires early, finds the lock renewed, and is armed
// again for the earliest deadline left.

// armExpiry makes the expiry timer fire no later than deadline. m.mu is
// held.
func (m *Manager) armExpiry(deadline time.Time) {
	if !m.expireAt.IsZero() && !deadline.Before(m.expireAt) {
		return
	}
	m.expireAt = deadline
	if m.expiry == nil {
		m.expiry = time.AfterFunc(time.Until(deadline), m.expire)
	} else {
		m.expiry.Reset(time.Until(deadline))
	}
}

// expire runs when the expiry timer fires: it ends the locks whose
// deadline has passed and arms the timer for the earliest deadline left.
func (m *Manager) expire() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.expireAt = time.Time{} // a lock tracked from here on arms the timer itself
	locks := make([]*Lock, 0, len(m.locks))
	for _, l := range m.locks {
		locks = append(locks, l)
	}
	m.mu.Unlock()
	var next time.Time
	for _, l := range locks {
		if d := l.expire(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
			next = d
		}
	}
	if !next.IsZero() {
		m.mu.Lock()
		if !m.closed {
			m.armExpiry(next)
		}
		m.mu.Unlock()
	}
}
