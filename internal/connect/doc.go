// Package connect is the one place locktop turns a DSN into a pgx
// configuration, so every connection it opens (the monitor, the simulator's
// pools, the commands) gives up on a server that never answers after the
// same bound: DefaultTimeout per connection attempt, unless the DSN or
// PGCONNECT_TIMEOUT sets a positive connect_timeout.
//
// Without it pgx waits for as long as the caller's context allows, and a
// host that drops packets keeps a TCP connect waiting for the kernel's
// retries (over a minute). The bound covers the dial, TLS and the start-up
// exchange of each attempt.
//
//	cfg, err := connect.PoolConfig(dsn)
//	...
//	pool, err := pgxpool.NewWithConfig(ctx, cfg)
package connect
