// Package lockcore takes PostgreSQL advisory locks for critical sections
// that span several transactions, and tells the holder at once when a lock
// is lost. It also states the contract of the whole lock family, which
// lockcore/redislock (Redis session locks) and lockcore/lease (lease rows
// on PostgreSQL or SQLite) follow too; lockcore/locktest checks every kind
// against it.
//
// # The family's contract
//
// Verbs: Acquire and TryAcquire return a held lock (a Hold: Context, Done,
// Err, Fence, Release, Owner); With and TryWith run a function under the
// lock and release it when the function returns or panics. A blocking
// acquire waits up to its Service's, Locker's or Manager's Wait, or the
// Wait(d) given to the call; TTL(d) sets a Redis grant's TTL.
//
// Errors match the same sentinels with errors.Is, whatever the kind:
// ErrLocked (a try found the lock held: TryWith reports false, nil),
// ErrTimeout (held for the whole wait, or the caller's deadline),
// ErrUnavailable (the store could not be reached), ErrLost (the lock ended
// while held: its context is cancelled with it as the cause, Done closes,
// Release returns it), ErrReleased (Err after Release), ErrNotHeld (an
// extend or release found the lock gone) and ErrReentrant (the caller's
// context holds the lock already, or, with a strict Order, one that must
// come after it). A cancelled acquire returns the context's error.
//
// Every grant has a fence strictly greater than every earlier grant's of
// the same lock, also across a crash of the store, within what each kind
// documents its fence survives. A waiter that dies while queued keeps the
// lock from the others for at most a bound each kind documents.
//
// A kind whose lock is a lease (a Redis TTL, a lease row) that the store's
// clock ends times the holder's loss on its own clock from LocalDeadline:
// from when the request that set the lease was sent, less Drift (1% of the
// lease plus 2ms) for clocks that run at different rates, so the holder
// gives the lock up no later than the store lets another holder have it.
//
// One owner id per process (Owner: host:pid:rand), or per task (WithOwner),
// is stamped on every lock of every kind: the application_name of advisory
// lock connections (model.AppWithOwner), the owner of a Redis hold or of a
// lease. A monitor then knows such holders for one.
//
// The locks a goroutine holds, of every kind, travel in its context (Held):
// each kind reads them for reentrancy, and the order check (Order) records
// that the held locks' classes (registry names: AGENT, SESSION, MAP) come
// before the new one's. A lock is its kind, its store and its name (Entry):
// the same name on two stores (two databases, two Redis servers or logical
// databases, two lease tables) is two locks, which one context may hold at
// once (lease takes them in its global order, the store's name last);
// each store answers reentrancy and fences for its own, and the order
// check keeps a class on two stores as two classes. The first acquire
// that closes a cycle is reported at once, before any deadlock: to
// OnInversion functions, to the log with both acquisition sites, and in
// locktop_lock_order_inversions_total.
// DeclareOrder declares ranks (lease declares PROJECT, MAP, SKETCH);
// OrderGraph.Handler serves the observed graph for monitors to merge.
//
// # Advisory locks
//
// A Key is two int32s (Pair, KeyFromString) or one int64 (Int64, HashKey),
// named from lockcore/registry. A Service takes session-scoped locks, each
// on a pooled connection of its own (give it a pool apart from the one the
// bodies work on), watches each held lock's connection so that a loss
// cancels the holder's context, and mints the fence in the lock statement; XactLock takes transaction-scoped locks. README.md in this
// directory has the rules every call follows, loss detection, what fences
// survive, in-process hand-off (HandOff), poolers and observers.
package lockcore
