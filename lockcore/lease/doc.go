// Package lease takes seed 004's lease locks: locks that are rows in a
// table, with a lease that runs out unless a heartbeat renews it, on
// PostgreSQL (many nodes, one central database) or SQLite (one node).
//
// # A first lock
//
//	m, err := lease.OpenSQLite(ctx, "locks.db", lease.Options{})   // or lease.OpenPostgres(ctx, pool, opts)
//	defer m.Close()
//	l, err := m.Acquire(ctx, lease.Map("m1"), lease.Write)          // waits up to Options.Wait
//	if err != nil { ... }                                            // ErrTimeout, ErrLockOrder, ...
//	defer l.Release(ctx)
//	work(l.Context(), l.Fence())                                     // cancelled if the lock is lost
//
// Resources are "project:ID", "map:ID" and "sketch:ID" (Project, Map,
// Sketch; the levels come from lockcore/registry); a lock is a resource in
// one Manager's tables (its database and schema, or its file), so the same
// resource through Managers on two of them is two locks (Manager.FenceOf,
// Manager.LockOf answer for their own). The package follows the
// lock family's contract (lockcore's package doc): With and TryWith run a
// function under a lock, lockcore.Wait(d) sets one acquire's wait, a Lock is
// a lockcore.Hold, its errors match lockcore's sentinels, and its owner is
// the process's lockcore.Owner() unless Options.Owner says otherwise.
//
// README.md in this directory has the details: the modes (Read, Write,
// Upgradeable) and their matrix, leases, heartbeats, loss and what fences
// survive, stale recovery and its audit, the lock order, waiting, the
// monitors' listings, errors, jobs under caps (StartJob), atomic writes
// (Lock.WriteAtomic), and the tables on each store.
package lease
