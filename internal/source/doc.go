// Package source is where locks come from, as one small interface: the
// PostgreSQL monitor (pgsource), a Redis holding session mutexes
// (redissource), the tables of lease locks (leasesource). Each source is
// polled with its own timeout and fails on its own; PollAll polls several
// at once and model.Merge joins their answers into one snapshot, so
// `locktop snapshot`, `locktop serve` and the dashboard (whose
// Options.Sources are Sources) show every kind in one table.
package source
