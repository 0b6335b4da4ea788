package lease

import "time"

// A Manager times its locks' deadlines and its acquires' waits with one
// timer each (lockcore/internal/alarm), not one per lock or per acquire:
//
//   - expiry ends a lock whose lease runs out with no heartbeat renewing
//     it, at its local deadline: its context is cancelled then, not only
//     when Err is next called. A renewal moves a deadline later only.
//   - waits ends an Acquire's wait at its deadline (Options.Wait,
//     lockcore.Wait): its context, which the store's requests run under,
//     is cancelled then, as context.WithDeadline's would be.

// expire runs when the expiry alarm fires: it ends the locks whose
// deadline has passed and arms the alarm for the earliest deadline left.
// It runs after Close too: a grant in flight as the Manager closed is
// tracked after Close listed the locks to release, and nothing else ends
// it when its lease runs out (TestAttackGrantAsManagerCloses).
func (m *Manager) expire() {
	m.mu.Lock()
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
		m.expiry.Arm(next)
	}
}
