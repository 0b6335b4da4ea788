// Package lockcore takes PostgreSQL advisory locks the way seeds 000 and 001
// require, and reads them back from pg_locks.
//
// # Keys
//
// A Key is either two int32s, pg_advisory_lock(space, id), or one int64,
// pg_advisory_lock(key). Pair, AgentKey and KeyFromString make two-int keys;
// Int64 and HashKey make one-bigint keys. String keys hash with FNV1a32, which
// matches the TypeScript hashString of seed 003 bit for bit, so a Go process
// and that service take the same lock for the same string. Every namespace
// and fixed id is registered in this package's registry (see Registry).
//
// # Session locks
//
// Service takes session-scoped locks on a dedicated connection from a pool,
// so a lock survives any number of commits the body makes on other
// connections. The rules, which every method follows:
//
//   - A blocking acquire waits at most its timeout (WithDefaultTimeout, 15s by
//     default) or until ctx's deadline, whichever is sooner, and the wait for
//     a pooled connection counts against it: an exhausted pool ends in
//     ErrTimeout, never a hang. The server's lock_timeout ends the wait, so
//     the server gives up first and the connection stays clean. Each lock
//     connection's session carries lock_timeout set just under the default
//     timeout (once per connection, with its application_name), so a usual
//     acquire is the bare pg_advisory_lock in one round trip; a shorter wait
//     sets lock_timeout inside its own lock statement. Give a Service a pool
//     of its own, or tell it with WithSharedPool that the pool serves other
//     work too: then every lock statement sets lock_timeout for itself and
//     the session is left alone.
//   - Cancelling ctx while waiting sends a cancel request to the server, so
//     the wait stops promptly (within two seconds even if the server does
//     not answer); the call returns an error wrapping ctx.Err() and nothing
//     stays held. A server that stops answering ends in ErrTimeout a couple
//     of seconds after the timeout (a deadline on the socket), not a hang.
//   - The keys a goroutine holds travel in the context given to the body. An
//     acquire of a key already held in that context, in the same database,
//     fails at once with ErrReentrant (TryWith reports "not acquired")
//     instead of deadlocking against its own connection. Unrelated contexts
//     serialise as usual; the same key in another database is another lock.
//   - After every failed or cancelled acquire, pg_advisory_unlock runs on the
//     same connection with a fresh short context, because PostgreSQL may have
//     granted the lock just as the wait failed (bug #17686). A true result is
//     a phantom lock cleaned up: it is counted and logged. The connection is
//     then closed, never returned to the pool.
//   - When the body returns an error or panics, the lock is released first,
//     then the error is returned or the panic resumed.
//   - Release frees the lock even if its context is cancelled; if the unlock
//     cannot run, the connection is closed, which ends the session and frees
//     the lock on the server.
//
// Every lock connection carries an application_name (WithApplicationName) so
// that a monitor can tell lock connections from work connections.
//
// Observers (WithObserver) are called synchronously; one that panics is
// logged and skipped. pgxpool pings a connection that has been idle for a
// second before handing it out, which costs an acquire a round trip after a
// quiet spell; a lock pool's Config.ShouldPing can turn that off, at the
// price of an acquire failing on a connection that died while idle.
//
// Session locks need a real session: they are not safe behind PgBouncer in
// transaction pooling mode, where consecutive statements may run on
// different server connections.
//
// # Transaction locks
//
// XactLock and TryXactLock take a lock that lasts until the given
// transaction ends, for the short atomic sections seed 003 describes.
//
// # Inspecting
//
// Inspect reads every advisory lock from pg_locks, with the backend that
// holds or waits, in one statement, and works out in Go who blocks whom.
package lockcore
