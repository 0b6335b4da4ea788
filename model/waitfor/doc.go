// Package waitfor builds the wait-for graph of a lock snapshot: who waits
// for whom, across objects and kinds, and the root blockers (sessions that
// hold what others wait for and wait for nothing themselves) with what
// they cost. The dashboard marks and orders root blockers with it and
// draws the whole forest; cycle detection (a deadlock across kinds) walks
// the same edges.
//
// A session is a backend of a PostgreSQL source or an owner of a Redis or
// lease source; an edge goes from a waiter to each holder its row names
// (model.Lock.BlockedBy, BlockedByOwners), within the source the row came
// from. It imports model only: plain data in, plain data out.
//
// A graph is built once per snapshot (For): the dashboard's table, its
// forest, its deadlock detector and serve's metrics share it.
package waitfor
