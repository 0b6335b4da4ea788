// Package metrics exports locktop's Prometheus metrics.
//
// A Metrics has a registry of its own (never the global one) with the Go
// runtime and process collectors, and three sources of locktop_ metrics:
//
//   - Observer returns a lockcore.Observer. Give it to every lockcore.Service
//     of the process (lockcore.WithObserver): it counts attempts, grants,
//     skips, timeouts, reentrancy refusals, cancellations, failures, phantom
//     unlocks and lost locks by namespace, and records wait and hold times.
//   - Snapshot takes each lock table the monitor reads and publishes the held
//     and waiting locks by kind, database and namespace. Each snapshot
//     replaces the previous one whole, so a namespace that no longer holds
//     or waits for anything disappears from the next scrape. Two counters
//     accrue from the snapshots and keep their series: the time blocked
//     (every waiter's wait since the poll before) and the lease recoveries
//     found in the audit trail.
//   - AddPools registers a function that reports connection pools; it is
//     called at every scrape, so pool gauges are never stale.
//
// With ByServer (a locktop that watches several targets), everything of
// one target carries a server label too: the snapshot gauges and counters,
// the sources', the poll errors, the deadlocks (the targets of the
// cycle's waits), and the pools named "NAME/pool" by their source
// (server="NAME", pool="pool"). Only the Observer's lock events, which are
// this process's own, have none.
//
// Label values are bounded: a namespace label is a registry name ("AGENT"),
// an unregistered two-int space as its number (at most MaxSpaceLabels of
// them, the rest as "other"), or "bigint" for every unregistered one-bigint
// key (hashed keys included).
//
// Wiring, for any part of locktop that runs lock services:
//
//	m := metrics.New()
//	locks := lockcore.New(pool, lockcore.Observe(m.Observer()))
//	m.AddPools(func() []model.PoolStats { return []model.PoolStats{locks.PoolStats("lock")} })
//	http.Handle("/metrics", m.Handler())
package metrics
