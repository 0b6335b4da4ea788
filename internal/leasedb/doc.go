// Package leasedb reads lockcore/lease's tables: the statements that list
// the holders, waiters, jobs and audit records on PostgreSQL and SQLite,
// their rows decoded and put in the lock order, and the fragments the
// lock path shares with them (a job's claim on its locks, SQLite's clock
// and time format). lockcore/lease lists through it (Manager.Locks, Jobs,
// Audit; its job scheduling) and so does the monitor's lease source
// (internal/source/leasesource): one copy of the SQL, kept out of lease's
// exported surface. Rows carry the stored text (lock_id, mode); the typed
// view is lease's.
package leasedb
