// Package querytext decides how much of a session's query text leaves the
// process: all of it, its shape with every literal replaced by $n (as
// pg_stat_statements shows statements), or none. Query texts often carry
// customer data in their literals (WHERE email = 'a@b.c'); the HTTP API,
// recordings, history and reports apply a Mode to every lock's Query
// before it is written or sent.
//
// Normalize is a small SQL lexer written for this, rather than a binding
// of PostgreSQL's parser (pg_query_go needs cgo and a C toolchain, and
// the texts pg_stat_activity gives are often truncated mid-statement, which
// a parser rejects): it needs to know only where literals and comments
// begin and end.
package querytext
