// Package redisserver starts throw-away Redis servers for the demo, the
// benchmarks and the tests, the way internal/pgcluster starts PostgreSQL.
//
// Start runs one redis-server in a directory of its own (internal/scratch),
// listening only on a Unix socket in that directory (port 0: no TCP), with
// no persistence (no RDB snapshots, no append-only file). Stop ends it and
// deletes the directory; Pdeathsig ends it if this process dies first, and
// the next Start sweeps a dead owner's directory at once. Restart stops the
// server and starts an empty one on the same socket, for tests of clients
// whose Redis goes away.
//
// StartCluster runs a three-master Redis Cluster on loopback TCP ports (a
// cluster's clients follow MOVED redirects to host:port addresses, so it
// cannot live on Unix sockets alone), for the tests that must hold on
// Redis Cluster.
//
// The binaries come from Debian's redis-server package; when they are
// missing the error says how to install them.
package redisserver
