// Package lease takes seed 004's lease locks: rows in a table, on
// PostgreSQL or SQLite.
package lease
