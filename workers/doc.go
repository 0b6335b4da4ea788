// Package workers holds seed 001's workloads as Go code: the hook routes,
// the background workers, deferred stop, summarisation, the config editor,
// the skill injector, the handoff executor and the remote agent service.
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
// # Checks
//
// The database is the source of truth, so the checks hold across processes
// that share one database:
//
//   - every critical section registers itself on entry (a row, counted under
//     a row lock of the agent) and leaves on exit: finding another section of
//     the same agent inside is an overlap. Another process's sections count
//     only while its live session is connected (Env.Join), so a process
//     killed inside a section leaves no false overlap behind;
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
// Live detections go to the Recorder as they happen, and the database marks
// what they reported; Audit repeats the checks over the database at the end
// of a run and reports what the live checks could not see (two statements
// at the same instant, events never applied, sections left behind).
//
// Cancellation: every workload takes a context; cancelling it stops the
// workload at its next statement or sleep and releases whatever it holds.
// Section bookkeeping on exit runs on a fresh short context so a cancelled
// run leaves no section behind.
package workers
