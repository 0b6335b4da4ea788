// Package incident reads a recording as an incident review needs it: the
// keys with the most total wait, the longest single waits, the holders that
// blocked the most waiters and for how long, the queue's length over time,
// and the expiries, recoveries and losses of leases, each with when it
// started and ended. locktop report prints it.
//
// It knows lock kinds only through model.Lock's common fields (the key, the
// holder, granted or waiting, the lease left), so every kind the monitor
// records is reviewed the same way.
package incident
