// Package lockcore takes PostgreSQL advisory locks for critical sections
// that span several transactions, and tells the holder at once when a lock
// is lost. It also writes down the contract of the whole lock family, which
// its other kinds (lockcore/redislock: Redis session locks; lockcore/lease:
// lease rows on PostgreSQL or SQLite) follow too.
//
// # The family's contract
//
// Every kind has the same verbs: Acquire and TryAcquire return a held lock
// (a Hold: Context, Done, Err, Fence, Release, Owner), With and TryWith run
// a function under the lock and release it. A blocking acquire waits up to
// the kind's default wait (its Service's, Locker's or Manager's Wait) or the
// Wait(d) given to the call; TTL(d) sets a Redis grant's TTL. Failures match
// the same sentinels with errors.Is, whatever the kind: ErrLocked (a try
// found the lock held: TryWith reports false, nil), ErrTimeout (held for the
// whole wait, or the caller's deadline), ErrUnavailable (the store could not
// be reached), ErrLost (the lock ended while held: the holder's context is
// cancelled with it as the cause, Done closes, Release returns it),
// ErrReleased (Err after Release), ErrNotHeld (an extend or release found
// the lock gone) and ErrReentrant (the caller's context holds the lock
// already, or, with a strict Order, one that must come after it). A
// cancelled acquire returns the context's error. Every grant has a fence
// strictly greater than every earlier grant's of the same lock, also across
// a crash of the store, within what each kind's documentation says its
// fence survives. A waiter that dies while queued (a crashed process) keeps
// the lock from the others for at most a bound each kind documents. The
// suite in lockcore/locktest checks all of this on every kind.
//
// One owner id per process (Owner: host:pid:rand) is stamped on every lock
// of every kind: the application_name of advisory lock connections
// (model.AppWithOwner), the owner of a Redis hold, the owner of a lease. A
// monitor then knows a PostgreSQL backend and a Redis or lease holder with
// the same id are one holder. A task's context may carry an id of its own
// (WithOwner), so that two tasks of one process, one holding while the
// other waits, are two parties to a monitor's wait-for graph, not one.
//
// The locks a goroutine holds, of every kind, travel in its context (Held):
// each kind reads them for its reentrancy check, and the order check
// (Order) records, for each acquire made while holding others, that the
// held locks' classes (registry names: AGENT, SESSION, MAP) come before the
// new one's. The first acquire that closes a cycle (two classes taken in
// both orders, across kinds too) is reported at once, before any deadlock:
// to OnInversion functions, to the log with both acquisition sites, and in
// the counter locktop_lock_order_inversions_total. Orders may also be
// declared (DeclareOrder; lockcore/lease declares PROJECT, MAP, SKETCH).
// OrderGraph.Handler serves the observed graph for monitors to merge.
//
// An advisory lock is a lock on a number, not on a row: every process that
// agrees on the number for a thing (an agent, a tenant's day) serialises
// its work on that thing through the database it already has. A
// session-scoped advisory lock lasts until it is unlocked or its session
// ends, whatever transactions the session commits or rolls back meanwhile.
//
// # Keys
//
// A Key is either two int32s, pg_advisory_lock(space, id), or one int64,
// pg_advisory_lock(key); PostgreSQL keeps the two kinds apart. Pair and
// KeyFromString make two-int keys; Int64 and HashKey make one-bigint keys.
// String keys hash with FNV1a32, over UTF-16 code units, bit for bit as the
// TypeScript service this project inherited its keys from, so both take the
// same lock for the same string. Key.String names keys from the registry
// (package lockcore/registry), where every space and fixed id this project
// uses is written down.
//
// # Session locks
//
// A Service takes session-scoped locks, each on a connection of its own
// from a pgxpool.Pool, so a lock survives any number of commits the
// critical section makes on other connections. Give a Service a pool of its
// own, apart from the pool the critical sections work on: a body waiting
// for a work connection then never starves a lock holder. The calls:
//
//   - With waits for the key, runs a function, and releases.
//     TryWith runs it only if no other session holds the key, and reports
//     acquired=false with a nil error otherwise (also when the caller's
//     context already holds the key).
//   - Acquire and TryAcquire return a held *Lock for holds that span
//     several steps; the caller calls Release. TryAcquire never returns a
//     nil Lock with a nil error: a key held elsewhere is ErrLocked.
//
// The rules every call follows:
//
//   - A blocking acquire waits at most its wait (the Wait option of New,
//     DefaultWait by default, or the Wait given to With or Acquire) or
//     until shortly before ctx's deadline,
//     whichever is sooner, and the wait for a pooled connection counts
//     against it: an exhausted pool ends in ErrTimeout, never a hang. The
//     server ends the wait itself (lock_timeout), so the connection stays
//     clean. Each lock connection's session carries lock_timeout set just
//     under the Service's timeout, once per connection, with its
//     application_name (and, with fencing, synchronous_commit on: see
//     Fencing), so a usual acquire is one lock statement (which also mints
//     the fence) in one round trip, and a release another; a wait of
//     another length sets lock_timeout inside its own lock statement. If
//     the pool serves other work too, say so with SharedPool: every lock
//     statement then sets lock_timeout and synchronous_commit for itself
//     and the session is left alone.
//   - Cancelling ctx while an acquire waits sends the server a cancel
//     request, so the wait stops at once (within two seconds even if the
//     server does not answer); the call returns an error wrapping
//     ctx.Err() and nothing stays held. A server that stops answering ends
//     in ErrTimeout a couple of seconds after the timeout.
//   - The keys a goroutine holds travel in the context given to the body
//     (and in Lock.Context). An acquire of a key already held in that
//     context, in the same database, fails at once with ErrReentrant
//     instead of deadlocking against its own connection: PostgreSQL would
//     grant it again on the same session, or queue it behind the caller on
//     another. Unrelated contexts serialise as usual; the same key in
//     another database is another lock. A database is known by what the
//     server says, not by the DSN's spelling: the cluster's system
//     identifier (the same on its physical standbys) and the database's
//     oid, read on the first acquire through each pool (a role that may
//     not read pg_control_system gets the pool's host and port instead).
//     XactLock refuses such a key too.
//   - After every failed or cancelled acquire, pg_advisory_unlock runs on
//     the same connection with a fresh short context, because PostgreSQL
//     may have granted the lock just as the wait failed (PostgreSQL bug
//     #17686). A true result is a phantom lock cleaned up: it is counted
//     (Phantoms, EventPhantom) and logged. The connection is then closed,
//     never returned to the pool.
//   - A pooled connection whose session ended while it sat idle (a
//     terminated backend, a server restart) is replaced by a fresh one
//     within the same timeout: the acquire does not fail on it.
//   - When the body returns an error or panics, the lock is released first,
//     then the error is returned or the panic resumed.
//   - Release frees the lock even if its context is cancelled; if the
//     unlock cannot run, the connection is closed, which ends the session
//     and frees the lock on the server.
//   - A waiter that dies while queued (its process killed: the operating
//     system closes its connection) keeps the key from nobody for longer
//     than a few milliseconds: PostgreSQL grants it the key in its turn,
//     its backend finds the client gone as it answers, and ends, which
//     frees the key (on a server with client_connection_check_interval
//     set, it leaves the queue before that). A waiter whose machine
//     vanishes without closing its connection waits no longer than its
//     lock_timeout; granted before that, it holds the key until the server
//     notices the dead connection, as a holder does (see Loss).
//
// # Loss
//
// A session lock is lost when its session ends while it is held: the
// backend is terminated (pg_terminate_backend, an idle-session timeout),
// the server shuts down, restarts or crashes, or the connection breaks.
// Another session may then be granted the key while the first holder still
// works. lockcore watches every held lock's connection, which is idle while
// the body works elsewhere, from a millisecond into the hold, and when the
// server's farewell (a FATAL message) or the connection's end arrives:
//
//   - the lock's context (the body's ctx, Lock.Context) is cancelled with
//     cause an error wrapping ErrLost: errors.Is(context.Cause(ctx),
//     ErrLost);
//   - Lock.Done is closed and Lock.Err returns an error wrapping ErrLost;
//   - observers get EventLost (on the watching goroutine) and the loss is
//     logged;
//   - the connection is closed and leaves the pool;
//   - Release then returns an error wrapping ErrLost and sends nothing, and
//     With returns the body's error joined with it.
//
// The delay from a terminated backend or a server restart to the cancel is
// what the server takes to send its message: a few milliseconds (see
// BENCHMARKS.md). A network that goes silent without closing the
// connection is noticed through TCP keepalive, which lock connections get
// (the KeepAlive option; DefaultKeepAlive detects it within 10 seconds);
// Unix sockets need none. The server frees the lock when it notices the
// dead connection itself (its tcp_keepalives_* settings); until then
// nobody else is granted the key. Messages a live session may send while idle
// (parameter changes, notices, notifications) are not a loss. No round trip
// is added: the watch only reads, and Release stops it with a read deadline.
//
// Detection leaves a window: between the loss and the moment the holder
// sees its context cancelled, the holder may still write. Fencing closes
// it.
//
// # Fencing
//
// Every grant carries a fencing token, Lock.Fence (Service.FenceOf in a
// body): a number strictly greater than the fence of every earlier grant of the same
// key in the same database, by any Service drawing from the same sequence
// (all of them, unless FenceSequence says otherwise). The fences of all
// keys come from that one sequence, so no two grants share one.
// Storage that accepts a write only with a fence at least as high as the
// last one it stored (UPDATE ... WHERE fence <= $1) refuses the writes of a
// holder whose lock was lost and granted to someone else since (Martin
// Kleppmann, "How to do distributed locking").
//
// In a body, Service.FenceOf gives the fence of a key held in that
// Service's database: a fence belongs to its database's sequence, and the
// same key may be held in two databases at once (nested Services).
// The package-level FenceOf serves a context that holds the key in one
// database only, and reports false when it is held in several.
//
// The fence is minted in the lock statement itself, after the grant
// (nextval on a sequence), so it costs no round trip.
//
// A fence is durable before its grant is reported: the lock statement
// commits with synchronous_commit on, whatever the server's or the role's
// setting (set once per lock connection, or in each statement with
// SharedPool), and the server answers after the commit. nextval
// writes WAL ahead (once in 32 calls, and first after each checkpoint), and
// only those grants wait for a flush. So fences keep increasing (jumping
// ahead by up to 32) across:
//
//   - a server crash or restart, also on a server that commits
//     asynchronously (synchronous_commit off for throughput);
//   - a failover to a synchronous standby, one that
//     synchronous_standby_names makes the primary wait for: the commit
//     waited for that standby to flush.
//
// They do not survive what loses committed work: a failover to an
// asynchronous standby, which may lack the old primary's last WAL and with
// it the last fences handed out; the restore of a backup or a point-in-time
// recovery; an operating-system crash of a server running with fsync off.
// After such an event, move the sequence past anything the old server may
// have handed out before locks are taken again, for example
// SELECT setval('lockcore.fence', nextval('lockcore.fence') + 1000000).
// Nor do they survive the sequence itself being set back (setval), dropped
// and created again, or replaced by another.
//
// The sequence,
// lockcore.fence by default (FenceSequence), is created on a Service's
// first acquire if it does not exist: CREATE SCHEMA IF NOT EXISTS lockcore;
// CREATE SEQUENCE IF NOT EXISTS lockcore.fence. That needs the CREATE
// privilege on the database once, and nextval needs USAGE on the schema and
// the sequence; without them an acquire fails with ErrFencing, saying so.
// A sequence that exists already is checked on a Service's first acquire
// (pg_sequence): it must be logged, with CACHE 1 (a cache hands each session
// its own range, so fences of two sessions would not compare), a positive
// increment and NO CYCLE; otherwise acquires fail with ErrFencing naming
// the ALTER SEQUENCE that fixes it. A sequence altered after that check is
// not seen. For a database that must not get new objects, or a read-only connection,
// turn fencing off with NoFencing: fences are then 0 and the statements the
// bare pg_advisory_lock. Transaction locks carry no fence.
//
// # In-process hand-off
//
// With HandOff, a Service passes a released lock straight to another of
// its goroutines waiting for the same key: that goroutine gets the session
// still holding the lock, so the grant costs no unlock, no lock and no
// wake-up of another backend. Only one goroutine of the Service (the key's
// owner) waits on the server; the others queue in the Service, first come
// first served, without a connection. Each hand-off is a grant like any
// other: a new Lock with its own context (carrying the key, for
// reentrancy), its own watch of the session (a loss is seen as before),
// and a new fence. The fences are drawn from the sequence on the holding
// session, ahead of need (up to 64 in one round trip, used in order): each
// was drawn while the session held the key, so it is above every earlier
// grant's, and below that of any grant after the session lets go. A draw
// that fails means the session is gone: the lock is lost, and the waiter
// takes the key on the server instead.
//
// The hand-off is bounded so that other sessions are served: after n
// hand-offs in a row, or hold after the server granted the lock, the lock
// is released on the server, where a waiter of another session queued
// earlier than the Service's next owner gets it first. It is off by
// default because waiters in the Service are not in pg_locks (a monitor
// sees only the holder); HandOffWaiting counts them.
//
// # Poolers
//
// Session locks need a real session: they are not safe behind PgBouncer (or
// any pooler) in transaction pooling mode, where consecutive statements of
// one client may run on different server sessions, so a lock can be taken
// on one and "released" on another. In session pooling mode they work; the
// watch then sees the pooler's connection, so a server backend's death
// reaches the holder when the pooler closes the client connection.
//
// # Observing
//
// Observers (the Observe option) see every attempt, grant, skip, timeout,
// refusal, cancel, failure, phantom unlock, release and loss, with wait and
// hold times. They are called synchronously on the goroutine of the lock
// call, and EventLost on the watching goroutine; one that panics is logged
// and skipped. Classify maps an error of this package to the event kind
// that reports it. Every lock connection carries an application_name
// (ApplicationName) so a monitor can tell lock connections from work
// connections. pgxpool pings a connection idle for a second before handing
// it out; a lock pool's Config.ShouldPing can turn that off, since an
// acquire replaces a connection that died idle anyway.
//
// # Transaction locks
//
// XactLock and TryXactLock take a lock that lasts until the given
// transaction ends, for short sections inside one transaction. XactLock
// refuses a key its context holds already in the transaction's database
// with ErrReentrant, as an acquire does (the wait would be for the caller's
// own session lock); TryXactLock simply reports false then.
package lockcore
