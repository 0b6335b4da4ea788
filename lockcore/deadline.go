package lockcore

import "time"

// The family's local deadline. A lease (a Redis key's TTL, a lease row's
// lease_expires) ends by the server's clock; its holder can only estimate
// that end on its own clock, from a moment no later than the server set it:
// when the request that set it was sent. Clocks also run at slightly
// different rates, so the estimate errs early by a margin proportional to
// the lease (Redlock's drift factor, 1%, plus 2ms for the timer's own
// lateness): a holder then gives a lease up for lost before the server can
// let another holder have it, never after.

// Drift is the margin a holder subtracts from a lease of ttl when it
// estimates the lease's end on its own clock: ttl/100 + 2ms.
func Drift(ttl time.Duration) time.Duration {
	return ttl/100 + 2*time.Millisecond
}

// LocalDeadline is when a holder must consider a lease of ttl over, by its
// own clock, when the request that set the lease was sent at sent: sent +
// ttl - Drift(ttl). Every kind of the family with a lease (lockcore's
// advisory locks have none) times its loss from it.
func LocalDeadline(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - Drift(ttl))
}
