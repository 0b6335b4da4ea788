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
// Sketch; the levels come from lockcore/registry). The package follows the
// lock family's contract (lockcore's package doc): With and TryWith run a
// function under a lock, lockcore.Wait(d) sets one acquire's wait, a Lock is
// a lockcore.Hold, its errors match lockcore's sentinels, and its owner is
// the process's lockcore.Owner() unless Options.Owner says otherwise.
//
// # Modes
//
// Read is shared; Write is exclusive; Upgradeable is a read that can
// become a write (Lock.Upgrade) once the other readers have left, in one
// transaction. At most one Upgradeable holder exists per resource, so two
// holders can never deadlock waiting to upgrade (seed 004's rule "a reader
// may upgrade when it is the only reader" would). The matrix:
//
//	held \ wanted   read  write  upgradeable
//	read            yes   no     yes
//	write           no    no     no
//	upgradeable     yes   no     no
//
// A writer that waits holds back readers that arrive after it (an upgrade
// in progress counts as a writer), so a stream of readers cannot starve it.
//
// # Leases, heartbeats and loss
//
// A grant's row carries lease_expires (now + Options.Lease, 30s by
// default) and heartbeat_ts, both from the database's clock: now() in
// PostgreSQL, SQLite's own time (milliseconds). Every Options.Heartbeat
// (Lease/3 by default) the Manager renews all its grants in one statement.
// A lease that has passed can no longer be renewed. The holder learns of a
// loss when it happens: its Lock.Context is cancelled with a cause
// wrapping ErrLost and Lock.Done closes, when a heartbeat finds the row
// gone (taken over, removed) or when its own lease runs out with no
// heartbeat renewing it (a timer on the local clock, which fires no later
// than the lease passes in the database). Release of a lock that was
// taken over returns an error wrapping ErrLost and touches nothing.
//
// Every grant has a fence (Lock.Fence, FenceOf): strictly greater than any
// earlier grant's for the resource, across takeovers and upgrades. Storage
// that keeps the highest fence it has seen and refuses lower ones cannot
// be written by a holder that lost its lease without noticing; WriteAtomic
// does that for its manifest.
//
// A fence is durable before its grant is reported. On PostgreSQL, a
// transaction that grants (or upgrades) commits with synchronous_commit on,
// whatever the server's or the role's setting: on a server that commits
// asynchronously each grant then waits for a WAL flush, and releases,
// heartbeats and waiter rows do not. SQLite commits everything with
// synchronous=FULL. So fences keep increasing across a crash or restart of
// the PostgreSQL server, also one that commits asynchronously, across a
// failover to a synchronous standby, and across a process killed while it
// uses a SQLite file. They do not survive what loses committed work: a
// failover to an asynchronous standby, the restore of a backup, an
// operating-system crash of a server running with fsync off. After such an
// event, raise every resource's fence past what the old server may have
// handed out before locks are taken again (on PostgreSQL: UPDATE
// <schema>.dal_resources SET fence = fence + 1000000). A crash of a server
// that commits asynchronously may also bring back the row of a lock
// released just before it: nobody renews it, so it is stale, and taken
// over, once its lease and grace have passed.
//
// # Stale recovery
//
// A holder is stale, and may be taken over, only when all of these hold
// (seed 004 §3.3): its lease has passed, its heartbeat is older than the
// recovering Manager's Options.Grace (2× Heartbeat by default), and no
// active job claims it: a running job whose lease has not passed claims
// the locks its owner ("job:ID") was granted since that job was queued, so
// a job retried under the ID of one that died (its lease passed) does not
// protect its predecessor's locks. Every takeover is a recovery: Acquire and
// TryAcquire take over a stale holder in their way, and RecoverStale frees
// a resource of its stale holders without taking it; each writes an audit
// record (who, when, why, the victim's owner and fence) in the same
// transaction that removes the holder. Audit lists them.
//
// # Lock order
//
// Several locks are taken in the global order of seed 004 §8.1: projects,
// then maps, then sketches, by ID within a level. A Lock's context carries
// what it holds: acquiring, with that context, a resource that sorts at or
// before one still held is refused with ErrLockOrder rather than risking a
// deadlock. AcquireAll and WithAll sort their requests and take all of
// them or none.
// A goroutine that holds a read lock must not take the same resource again
// through an unrelated context: a waiting writer would hold the second
// read back, and wait itself for the first.
//
// # Waiting
//
// Acquire waits up to Options.Wait. It retries with exponential backoff
// and jitter (seed 004 §8.3; 16ms doubling up to Lease/10, at most 1s) and
// is woken early by a release: PostgreSQL's LISTEN/NOTIFY on a connection
// of the Manager's own, in-process wake-ups on SQLite (other processes on
// one SQLite file fall back on the backoff). While it waits, a waiter row
// records who waits for what since when, for monitors (Locks, Inspect,
// InspectPostgres, InspectSQLite).
//
// A waiter that dies while queued (its process killed) never keeps the
// resource from a writer: a waiter holds nothing and is handed nothing,
// and writers do not look at waiter rows. A dead writer's row holds back
// readers that arrive after it (writer precedence) until it lapses: a
// waiter row lives ten times the backoff cap unless its waiter retries
// (10 × min(max(Lease/10, 50ms), 1s), at least 2s: 10s with the default
// 30s lease).
//
// # Monitors
//
// Manager.Locks and Manager.Inspect list every process's holders and
// waiters; InspectPostgres(ctx, q, schema) and InspectSQLite(ctx, path)
// read the same Snapshot without a Manager, read-only, creating nothing (no
// schema, table or file: an error wrapping ErrNoSchema where lease locks
// were never used) and locking nothing, in one round trip on PostgreSQL
// and one read transaction on SQLite. A Snapshot carries the database's
// clock (Now), each holder's and waiter's Info (resource, mode, owner,
// fence, lease expiry and LeaseLeft, heartbeat and HeartbeatAge, since,
// metadata, Stale by the grant's own Grace, a waiter's Position in its
// resource's queue), the jobs, and the newest audit records.
//
// # Errors
//
// Every failed operation returns an *Error (operation, resource, mode,
// time waited) wrapping one of the package's sentinels, a context error or
// the driver's. ErrLocked, ErrTimeout, ErrLost and ErrReleased also match
// lockcore's sentinels of the same name, so errors.Is(err,
// lockcore.ErrLost) holds for a lost lease as for a lost advisory lock.
// Transient aborts are not errors of their own: PostgreSQL's serialization
// failures and deadlocks (under a default_transaction_isolation above read
// committed) are retried at once by acquires and releases, and so is a
// request that found its pooled connection's session ended before it ran
// (a server crash or restart, a terminated backend), on another
// connection; on SQLite, a file another process keeps locked past the busy
// timeout (10s) is waited out by Acquire on its backoff and is ErrBusy
// elsewhere, so a TryAcquire can block for up to the busy timeout before
// it returns ErrBusy.
//
// # Jobs
//
// StartJob queues a Job and returns once a slot is free under
// Options.MaxGlobalJobs, MaxJobsPerProject and MaxMapJobsPerProject,
// across every process sharing the database, fairly between projects: the
// next slot goes to the project with the fewest jobs running plus queued
// ahead, and among equals to the one served longest ago, so a project
// with 100 queued jobs does not starve one with 1. A job heartbeats like
// a lock; locks acquired with JobSlot.Context are owned by the job
// ("job:ID"), stale recovery leaves them alone while the job lives (that
// run of the job: not a later job reusing its ID), and
// JobSlot.Finish releases what it still holds and frees the slot.
//
// # Atomic writes
//
// Lock.WriteAtomic runs seed 004 §5.1's file sequence under a write lock:
// write into <dir>/tmp/<uuid>/, fsync the files and the directory, check
// the device, rename, fsync the parent, and mark the manifest row
// committed in a transaction that checks the lock is still held. Readers
// find the committed version with Manager.Manifest; a crash at any step
// leaves the previous version visible, never half of the new one. It
// deletes only what grants with a lower fence left (their tmp directories
// and uncommitted versions, and the version its commit superseded), and
// only after checking again that its lease holds: never the committed
// version, never a later holder's files.
//
// # Stores
//
// PostgreSQL keeps the tables in Options.Schema ("locktop_lease"), created
// if missing: dal_locks (one row per grant: lock_id, owner, mode, fence,
// lease_expires, heartbeat_ts, metadata), dal_resources (each resource's
// last fence), dal_waiters, dal_audit, dal_jobs and dal_manifest. An
// uncontended acquire is one round trip and a release another. SQLite
// keeps the same tables in its file, in WAL mode, each write one BEGIN
// IMMEDIATE transaction (a deferred one that reads then writes fails with
// SQLITE_BUSY under WAL whatever the busy timeout).
package lease
