// Package locktest is the lock family's conformance suite: one set of tests
// that every kind of lock passes (advisory locks, Redis session locks,
// leases on PostgreSQL and on SQLite, in this package's tests; a kind of
// one's own, through Run). Kind-specific tests stay beside their kind.
//
// What it checks, on a store of the test's own, with two or more holders
// (Services, Lockers, Managers) on it:
//
//   - exclusion under contention: With from several goroutines and holders
//     never overlaps, and the fences of the grants strictly increase;
//   - try: TryAcquire of a held lock fails with an error matching
//     lockcore.ErrLocked and no lock; TryWith reports false without running;
//   - wait and timeout: Acquire with lockcore.Wait gives up with
//     lockcore.ErrTimeout, and gets the lock when the holder releases in
//     time;
//   - cancellation: cancelling a waiting Acquire ends it with the context's
//     error, and leaves nothing behind;
//   - loss: a hold ended from outside (a killed backend, a deleted Redis
//     key, a deleted lease row) cancels the body's context with cause
//     lockcore.ErrLost, and With returns an error matching it;
//   - fences strictly increase across grants, and across a grant to
//     another holder after a loss (a steal); Release after the loss returns
//     an error matching lockcore.ErrLost;
//   - reentrancy: acquiring a lock the context holds fails at once with
//     lockcore.ErrReentrant (TryWith: false), instead of waiting for itself;
//   - another store: the same name on another store of the kind
//     (Store.Elsewhere: another database, Redis, set of tables) is another
//     lock, which a context holding the first takes in either nesting
//     (a kind that orders its stores, Kind.StoresOrdered, refuses the
//     nesting against that order at once), while each store still refuses
//     its own again as reentrant;
//   - a dead waiter: a process waiting for a held lock is killed with
//     SIGKILL (no clean-up of any kind); the holder then releases, and a
//     live waiter gets the lock within the kind's Kind.DeadWaiterBound
//     (plus a few seconds' slack for a loaded machine);
//   - fences across a crash: on a store the test may crash (Kind.Crash),
//     for each of two holders and each of Acquire and TryAcquire: a grant,
//     a checkpoint, five grants, a crash, three grants, every fence above
//     every earlier one (and above those of the grants the crashed party
//     made, where it is a process of its own);
//   - no leaks: after every test, a fresh holder can take every lock used,
//     and no goroutine is left. A lock left held is reported with its
//     holders (owner, fence, when granted, lease and heartbeat) when the
//     store can list them (a Describer, as the lease kinds' stores are).
//
// The dead-waiter case runs the waiter in another process (Store.Waiter):
// the test binary run again, which its TestMain must send to the waiter's
// code before it starts any server.
package locktest
