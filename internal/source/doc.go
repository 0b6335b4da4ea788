// Package sources is where locks come from, as one small interface: the
// PostgreSQL monitor, a Redis holding session mutexes (redis.go), a table
// of leases (lease.go). Each source is polled with its own timeout and
// fails on its own; PollAll polls several at once and model.Merge joins
// their answers into one snapshot, so `locktop snapshot`, `locktop serve`
// and the dashboard (whose ui.LockSource has the same two methods) show
// every kind in one table.
package source
