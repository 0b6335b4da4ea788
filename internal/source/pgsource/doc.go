// Package pgsource watches a PostgreSQL server's advisory locks, safely
// enough to point at production.
//
// A Monitor keeps one read-only connection with application_name
// "locktop.monitor" and its own statement_timeout and lock_timeout, all set
// in the connection's start-up packet: no SET per refresh, and a poll can
// never queue behind the locks it watches. Each Poll is one statement
// (Inspect, on pglocks.Read; a Monitor reads with a pglocks.Reader, which
// reuses the last poll's order of the rows when they did not change).
// Between polls the Monitor remembers when it first saw each grant, so held
// times are "held for at least". It reconnects on the next Poll after the
// connection drops.
//
// The poll names relations of the monitor's own database (and shared
// catalogs) only; those of other databases come back as oids. The Monitor
// names them in their own databases, asynchronously, through a cache and a
// connection per database opened on a miss and closed when idle (see
// namer): a poll never waits for a lookup, an unknown relation reads
// "db2 oid 16390" until its name is in, and a database that cannot be
// entered is said in Snapshot.Partial. Named waits for the lookups in
// flight, for a reader that polls once.
package pgsource
