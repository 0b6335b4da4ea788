// Package pgsource watches a PostgreSQL server's advisory locks, safely
// enough to point at production.
//
// A Monitor keeps one read-only connection with application_name
// "locktop.monitor" and its own statement_timeout and lock_timeout, all set
// in the connection's start-up packet: no SET per refresh, and a poll can
// never queue behind the locks it watches. Each Poll is one statement
// (Inspect, on lockcore.ReadLocks). Between polls the Monitor remembers when it first saw
// each grant, so held times are "held for at least". It reconnects on the
// next Poll after the connection drops.
package pgsource
