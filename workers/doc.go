// Package workers holds seed 001's workloads as Go code: the hook routes,
// the background workers, deferred stop, summarisation, the config editor,
// the skill injector, the handoff executor and the remote agent service;
// and seed 002's conversation turns (Turns) and seed 004's job system
// (Jobs), which run on the same Env (its database, recorder, locking
// switch and test hooks).
//
// Each workload does what the seed's code does, intermediate commits
// included, over a small schema of its own (agents, counters, commands,
// turns, a transcript and an event ledger; see Setup). Statements run on a
// work pool, one pooled connection per statement or transaction, as the
// seed's ORM session does between commits; locks come from a
// lockcore.Service. With locking switched off (Env.SetLocking) the same code
// runs without any lock, so the races of the seed are real and the checks
// below catch them.
//
// # Locks
//
//   - The 8 mutating hook routes correlate the agent, then take the AGENT lock
//     with a blocking With; the read-only status route takes no lock.
//   - The agent reaper, transcript reconciler, context poller and tmux
//     watchdog take TryWith per agent and skip an agent that is held. The
//     reaper commits inside the lock, one agent at a time.
//   - Deferred stop sleeps first, then locks, then re-reads the command and
//     skips it if it is already COMPLETE.
//   - The summariser takes SELECT ... FOR UPDATE NOWAIT on the turn row and
//     returns nothing on 55P03, or the existing summary.
//   - The config editor does read-modify-write of a JSON file under flock.
//   - The skill injector re-reads the agent before checking
//     prompt_injected_at, under the agent lock.
//   - The handoff executor and the remote agent service take the agent lock
//     around their critical step.
//
// # Lost locks and fencing
//
// A session lock is lost when its backend dies (terminated, a server
// restart, a cut connection) while the section runs: another waiter is
// granted the key at once, and the holder, which has not noticed yet, could
// write over the successor's work. Two things stop it:
//
//   - the body's context is cancelled with cause lockcore.ErrLost when
//     lockcore sees the loss, so the body stops at its next statement;
//   - each section records its lock's fence on entry (agents.fence, raised
//     only upward, under the agent's row lock) and every write of the
//     section is conditional on it: sent in one transaction after
//     check_fence, which holds the agent's row FOR SHARE, so a newer fence
//     raised by a successor refuses the write (ErrFenced), and a raise under
//     way waits for a write under way. A fence of 0 (locks off, or fencing
//     off) means unfenced: the writes go through as before.
//
// A lost section reports its loss with its attempt (Outcome lost,
// Attempt.Loss): whether the fence refused a write, the cancel stopped it,
// or it was lost only after its writes, each accepted under its fence.
//
// # Checks
//
// The database is the source of truth, so the checks hold across processes
// that share one database:
//
//   - every critical section registers itself on entry (a row with its
//     lock's backend pid and fence, counted under a row lock of the agent)
//     and leaves on exit: finding another live section of the same agent
//     inside is an overlap. A registered section whose backend no longer
//     holds the agent's lock (or whose fence is older than the agent's) is
//     a lost holder running on, not a second live holder: it is noted, and
//     its writes are refused. Another process's sections count only while
//     its live session is connected (Env.Join), so a process killed inside
//     a section leaves no false overlap behind; rows older than the
//     server's start are left from before a restart and never count, and a
//     section's row is deleted on a fresh connection when the first one
//     turns out dead;
//   - events go to a transcript first and are applied to a ledger by the hook
//     or, later, the reconciler: an event in the ledger twice, or never, was
//     not applied exactly once;
//   - read-modify-write counters log every value they write: two writes of
//     the same value to one counter are a lost update;
//   - summary calls, skill injections, command completions, handoffs and
//     remote sends are claims on a subject: two claims on one subject break
//     "at most once" (claims are numbered under a unique key, so a claim
//     inside an open transaction is counted by the next one at once);
//   - config keys whose edit completed must all be in the file (AuditConfig,
//     run every second or so while the workloads run).
//
// Each run judges only its own work (Env.Begin): the checks count the rows
// written since the run began, so a schema that an earlier run without
// locks damaged (a counter set back, a subject claimed twice) passes none
// of its violations on. Claims are made in the transaction of the write
// they stand for, so a claim is never left without its effect.
//
// Live detections go to the Recorder as they happen, and the database marks
// what they reported; Audit repeats the checks over the database at the end
// of a run and reports what the live checks could not see (two statements
// at the same instant, events never applied, sections left behind).
//
// # Seed 002: conversation turns
//
// Turns drives the Redis session mutex (lockcore/redislock) as the seed's
// LogicalTurnWorkflow does (see Turns.Deliver): pods with Lockers of their
// own, a hold taken in step 1 and resumed by token in later steps, long
// brain runs that extend, and faults (pod crashes, Redis outages, runs
// that forget to extend). Each turn raises the conversation's fence on
// entry and commits in a transaction that refuses an older fence. The
// commit counts what the run already committed that it repeats (its turn
// number, its message, its starting scenario step): InvTurnSequence,
// InvAnsweredOnce, InvStaleStep, InvStaleFence; Turns.Audit repeats them,
// finds gaps, and checks that every hold is released or left to expire
// (InvTurnLocks).
//
// # Seed 004: jobs on lease locks
//
// Jobs drives lockcore/lease: map writes (Manager.WithAll of a project
// read and a map write, a tile set by Lock.WriteAtomic), viewers and exports,
// sketch edits, bulk jobs, upgradeable readers, and job slots under the
// caps; its faults run on a node whose heartbeats never run (a dead
// worker, a stalled one). Every section registers a hold per resource
// (enter_hold): a conflicting live hold beside it breaks
// InvExclusiveWriter, unless both are fenced, when the older grant's
// holder is a lost one running on (noted; if the lease store still lists
// it granted, the invariant breaks all the same). Readers check tile sets
// (InvTileSet), running jobs are counted against the caps in the database
// (InvJobCaps), slot waits of the projects that do not flood are bounded
// (InvStarvation), bulk jobs end within their retries (InvDeadlock), and
// Jobs.Audit checks every stale recovery of this process's grants against
// the lease store's audit records (InvRecovery) and that no lease or job
// is left (InvNoLeaks).
//
// Cancellation: every workload takes a context; cancelling it stops the
// workload at its next statement or sleep and releases whatever it holds.
// Section bookkeeping on exit runs on a fresh short context so a cancelled
// run leaves no section behind.
package workers
