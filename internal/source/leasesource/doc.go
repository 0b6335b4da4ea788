// Package leasesource is the monitor's lease source: the lease locks of
// lockcore/lease (the FOLE lease locks), read from their tables in a
// PostgreSQL schema or a SQLite file, as model locks of kind lease with
// mode, lease left, heartbeat, stale flag and fence, each waiter blocked
// by the holders whose mode conflicts with its own, and the newest audit
// records. Postgres and SQLite make a source.Source of either store. It
// reads through internal/leasedb, the listing lockcore/lease itself uses,
// kept out of lease's exported surface: the library takes locks, the
// monitor shows them.
package leasesource
