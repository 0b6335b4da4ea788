// Package registry names every lock key of every kind locktop knows: the
// advisory lock namespaces, fixed ids and hashed patterns of PostgreSQL, the
// Redis session-lock key patterns and the lease resource levels.
//
// It is the code form of the hand-kept table of seed 003 ("All new advisory
// lock IDs MUST be documented in this file"), widened to every lock kind: a
// lock library takes its names from here, a monitor turns raw keys back into
// these names, and `locktop registry` prints the table. Adding a lock means
// adding an entry to the table in entries.go; Check (and its test) fails on a
// duplicate name, space, id or pattern.
//
// The package imports only the standard library, so the lock libraries, the
// data model and the user interface can all depend on it.
package registry
