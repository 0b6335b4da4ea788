package lease

import "github.com/locktop/locktop/internal/leasedb"

// The PostgreSQL statements. {s} stands for the schema (checked against a
// strict pattern, so it is inlined, not quoted). Times come from now(),
// the transaction's start on the server's clock; durations travel as
// microseconds. testdata/bench/lease-cycle.sql sends the acquire and
// release statements as they are here (a test checks it).

// pgJobClaim: a running job's claim on its locks (leasedb.PGJobClaim).
const pgJobClaim = leasedb.PGJobClaim

// pgDDL creates the tables. dal_locks keeps seed 004 §3.2's columns
// (lock_id, owner, lease_expires, heartbeat_ts, metadata), one row per
// grant, since a read lock has many holders: a grant is its token (kept
// across an upgrade) and its fence (unique per resource).
var pgDDL = []string{
	`CREATE SCHEMA IF NOT EXISTS {s}`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_resources (
		lock_id text PRIMARY KEY,
		fence   bigint NOT NULL DEFAULT 0
	)`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_locks (
		token         text PRIMARY KEY,
		lock_id       text NOT NULL,
		fence         bigint NOT NULL,
		mode          text NOT NULL,
		owner         text NOT NULL,
		lease_expires timestamptz NOT NULL,
		heartbeat_ts  timestamptz NOT NULL,
		granted_at    timestamptz NOT NULL,
		grace_ms      bigint NOT NULL,
		metadata      jsonb NOT NULL DEFAULT '{}',
		UNIQUE (lock_id, fence)
	)`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_waiters (
		id           text PRIMARY KEY,
		lock_id      text NOT NULL,
		mode         text NOT NULL,
		owner        text NOT NULL,
		since        timestamptz NOT NULL,
		heartbeat_ts timestamptz NOT NULL,
		expires      timestamptz NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS dal_waiters_lock_id ON {s}.dal_waiters (lock_id)`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_audit (
		id           bigserial PRIMARY KEY,
		lock_id      text NOT NULL,
		actor        text NOT NULL,
		reason       text NOT NULL,
		victim_owner text NOT NULL,
		victim_mode  text NOT NULL,
		victim_fence bigint NOT NULL,
		fence        bigint NOT NULL,
		at           timestamptz NOT NULL
	)`,
	`CREATE SEQUENCE IF NOT EXISTS {s}.dal_jobs_seq`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_jobs (
		id            text PRIMARY KEY,
		owner         text NOT NULL,
		project       text NOT NULL,
		map           text NOT NULL,
		kind          text NOT NULL,
		process       text NOT NULL,
		state         text NOT NULL,
		seq           bigint NOT NULL,
		queued_at     timestamptz NOT NULL,
		started_at    timestamptz,
		lease_expires timestamptz NOT NULL,
		heartbeat_ts  timestamptz NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS dal_jobs_owner ON {s}.dal_jobs (owner)`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_job_gate (id int PRIMARY KEY)`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_job_turns (
		project text PRIMARY KEY,
		served  bigint NOT NULL
	)`,
	`INSERT INTO {s}.dal_job_gate VALUES (1) ON CONFLICT DO NOTHING`,
	`CREATE TABLE IF NOT EXISTS {s}.dal_manifest (
		lock_id      text NOT NULL,
		name         text NOT NULL,
		path         text NOT NULL,
		fence        bigint NOT NULL,
		state        text NOT NULL,
		committed_at timestamptz NOT NULL,
		PRIMARY KEY (lock_id, name)
	)`,
	// The tables' name (where), drawn once when they are made: what every
	// process, any role, any spelling of the DSN reads alike, before and
	// after a restart (the server's start time, all a role that may not
	// read pg_control_system could name the cluster by, was not).
	`CREATE TABLE IF NOT EXISTS {s}.dal_store (
		one boolean PRIMARY KEY DEFAULT true CHECK (one),
		id  text NOT NULL
	)`,
	`INSERT INTO {s}.dal_store (id)
		VALUES (md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text))
		ON CONFLICT DO NOTHING`,
}

// pgLastTable is created last: when it exists, the schema is complete.
// Tables made before dal_store was are completed by running pgDDL again.
const pgLastTable = "dal_store"

// pgDurable ends the RETURNING list of every statement that grants (a new
// grant, an upgrade), renews a lease, recovers a stale holder, sets a
// grant's metadata or ends a job: when, and only when, it does, its transaction then commits with synchronous_commit on,
// whatever the server's or the role's setting, and the server answers
// after that commit. A fence must be
// durable before its grant is reported: on a server that commits
// asynchronously (synchronous_commit off) a crash loses the last commits,
// and with them the resource's last fences, which would then be handed out
// again. A renewal likewise: a crash that took it back would bring the row
// back with an older lease, already passed, while the holder's local
// deadline counts from the renewal; another acquire would take the lock
// over while the holder still believes it holds. The column it adds is
// not read.
const pgDurable = "set_config('synchronous_commit', 'on', true)"

const (
	pgEnsureResource = `INSERT INTO {s}.dal_resources (lock_id) VALUES ($1) ON CONFLICT (lock_id) DO NOTHING`
	pgLockResource   = `SELECT fence, now() FROM {s}.dal_resources WHERE lock_id = $1 FOR UPDATE`
	// pgState reads a resource's holders and waiters in one statement:
	// kind 'h' (holder: token, mode, owner, fence, lease, heartbeat, claimed
	// by an active job) or 'w' (waiter: id, mode, expires).
	pgState = `SELECT 'h', l.token, l.mode, l.owner, l.fence, l.lease_expires, l.heartbeat_ts, ` + pgJobClaim + `
FROM {s}.dal_locks l WHERE l.lock_id = $1
UNION ALL SELECT 'w', w.id, w.mode, w.owner, 0, w.expires, w.expires, false FROM {s}.dal_waiters w WHERE w.lock_id = $1`
	// pgBumpResource starts a fast acquire: it creates the resource's row
	// or takes it (the row lock every attempt on the resource queues on)
	// and mints the fence this attempt grants, if it grants. A refused
	// attempt leaves that number unused: fences only ever grow.
	pgBumpResource = `INSERT INTO {s}.dal_resources AS r (lock_id, fence) VALUES ($1, 1)
ON CONFLICT (lock_id) DO UPDATE SET fence = r.fence + 1 RETURNING fence, now()`
	pgGrant = `WITH f AS (UPDATE {s}.dal_resources SET fence = fence + 1 WHERE lock_id = $1 RETURNING fence)
INSERT INTO {s}.dal_locks (token, lock_id, fence, mode, owner, lease_expires, heartbeat_ts, granted_at, grace_ms)
SELECT $2, $1, f.fence, $3, $4, now() + $5 * interval '1 microsecond', now(), now(), $6 FROM f
RETURNING fence, lease_expires, granted_at, ` + pgDurable
	// pgFastGrant grants unless a holder in a conflicting mode ($7) exists
	// or, when precedence applies ($8), a live writer other than the
	// request itself ($9) waits: the acquire of the common case, without
	// recovery, in the attempt's first round trip.
	pgFastGrant = `INSERT INTO {s}.dal_locks (token, lock_id, fence, mode, owner, lease_expires, heartbeat_ts, granted_at, grace_ms)
SELECT $2, $1, r.fence, $3, $4, now() + $5 * interval '1 microsecond', now(), now(), $6 FROM {s}.dal_resources r
WHERE r.lock_id = $1
	AND NOT EXISTS (SELECT 1 FROM {s}.dal_locks WHERE lock_id = $1 AND mode = ANY($7::text[]))
	AND NOT ($8::bool AND EXISTS (SELECT 1 FROM {s}.dal_waiters WHERE lock_id = $1 AND mode = 'write' AND expires > now() AND id <> $9))
RETURNING fence, lease_expires, granted_at, ` + pgDurable
	// pgWaitIfRefused writes or refreshes the waiter row unless the grant
	// token ($6) was just inserted; pgUnwaitIfGranted deletes it if it was.
	pgWaitIfRefused = `INSERT INTO {s}.dal_waiters (id, lock_id, mode, owner, since, heartbeat_ts, expires)
SELECT $1, $2, $3, $4, now(), now(), now() + $5 * interval '1 microsecond'
WHERE NOT EXISTS (SELECT 1 FROM {s}.dal_locks WHERE token = $6)
ON CONFLICT (id) DO UPDATE SET heartbeat_ts = now(), expires = excluded.expires`
	pgUnwaitIfGranted = `DELETE FROM {s}.dal_waiters WHERE id = $1 AND EXISTS (SELECT 1 FROM {s}.dal_locks WHERE token = $2)`
	pgPurgeDead       = `DELETE FROM {s}.dal_waiters WHERE lock_id = $1 AND expires <= now()`
	pgUpgrade         = `WITH f AS (UPDATE {s}.dal_resources SET fence = fence + 1 WHERE lock_id = $1 RETURNING fence)
UPDATE {s}.dal_locks l SET mode = 'write', fence = f.fence, lease_expires = now() + $3 * interval '1 microsecond', heartbeat_ts = now()
FROM f WHERE l.token = $2
RETURNING l.fence, l.lease_expires, l.granted_at, ` + pgDurable
	// pgVictim removes a stale holder and writes its audit record, in one
	// statement of the takeover's transaction. The lease and job checks are
	// repeated as a guard; a lapsed lease cannot be renewed (pgRenewLocks),
	// so the heartbeat cannot have moved since the attempt read it. The
	// record is durable (pgDurable) before the recovery is reported, also
	// RecoverStale's, which grants nothing: every force-release the caller
	// was told of stays in the audit trail (seed 004 §8.2).
	pgVictim = `WITH v AS (DELETE FROM {s}.dal_locks l WHERE l.token = $1 AND l.lease_expires < now() AND NOT ` + pgJobClaim + `
	RETURNING l.lock_id, l.owner, l.mode, l.fence)
INSERT INTO {s}.dal_audit (lock_id, actor, reason, victim_owner, victim_mode, victim_fence, fence, at)
SELECT v.lock_id, $2, $3, v.owner, v.mode, v.fence, $4, now() FROM v
RETURNING ` + pgDurable
	pgUpsertWaiter = `INSERT INTO {s}.dal_waiters (id, lock_id, mode, owner, since, heartbeat_ts, expires)
VALUES ($1, $2, $3, $4, now(), now(), now() + $5 * interval '1 microsecond')
ON CONFLICT (id) DO UPDATE SET heartbeat_ts = now(), expires = excluded.expires`
	pgDeleteWaiter = `DELETE FROM {s}.dal_waiters WHERE id = $1`
	pgPurgeWaiters = `DELETE FROM {s}.dal_waiters WHERE id = ANY($1) AND expires <= now()`
	pgNotify       = `SELECT pg_notify($1, $2)`
	// A release is one pipelined (implicit) transaction. First it takes the
	// resource's row FOR SHARE, which conflicts with what every acquire
	// takes first (pgBumpResource's update, pgLockResource's FOR UPDATE) and
	// not with other releases: it waits for an acquire in flight to commit
	// its waiter row, and a later acquire waits for the release's commit
	// (and then sees the grant gone). Then it deletes the grant, and
	// NOTIFYs only if someone waits: an uncontended release wakes no
	// listener anywhere, and no waiter misses its wake-up. The row comes
	// before the grant, as in every attempt (resource, then grants): a
	// release that deleted first and then waited for the row would deadlock
	// with a recovery deleting the same grant.
	pgShareRow   = `SELECT 1 FROM {s}.dal_resources WHERE lock_id = $1 FOR SHARE`
	pgRelease    = `DELETE FROM {s}.dal_locks WHERE token = $1`
	pgWakeIfWait = `SELECT pg_notify($2, $1) WHERE EXISTS (SELECT 1 FROM {s}.dal_waiters WHERE lock_id = $1 AND expires > now())`
	pgDropWaiter = `WITH d AS (DELETE FROM {s}.dal_waiters WHERE id = $1 RETURNING lock_id, mode)
SELECT pg_notify($2, d.lock_id) FROM d WHERE d.mode = 'write'`
	pgRenewLocks = `UPDATE {s}.dal_locks SET lease_expires = now() + $2 * interval '1 microsecond', heartbeat_ts = now()
WHERE token = ANY($1) AND lease_expires > now() RETURNING token, ` + pgDurable
	pgRenewJobs = `UPDATE {s}.dal_jobs SET lease_expires = now() + $2 * interval '1 microsecond', heartbeat_ts = now()
WHERE id = ANY($1) AND lease_expires > now() RETURNING id, ` + pgDurable
	// pgSetMetadata is durable (pgDurable): the holder goes on holding
	// after a crash, and must not find the context it set taken back.
	pgSetMetadata = `UPDATE {s}.dal_locks SET metadata = $2::jsonb WHERE token = $1 RETURNING ` + pgDurable

	pgEnqueue = `INSERT INTO {s}.dal_jobs AS j (id, owner, project, map, kind, process, state, seq, queued_at, lease_expires, heartbeat_ts)
VALUES ($1, $2, $3, $4, $5, $6, 'queued', nextval('{s}.dal_jobs_seq'), now(), now() + $7 * interval '1 microsecond', now())
ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, project = excluded.project, map = excluded.map, kind = excluded.kind,
	process = excluded.process, state = 'queued', seq = excluded.seq, queued_at = excluded.queued_at, started_at = NULL,
	lease_expires = excluded.lease_expires, heartbeat_ts = excluded.heartbeat_ts
WHERE j.lease_expires <= now()
RETURNING seq`
	pgJobGate = `SELECT now() FROM {s}.dal_job_gate WHERE id = 1 FOR UPDATE`
	pgJobs    = leasedb.PGJobs
	pgTurns   = `SELECT project, served FROM {s}.dal_job_turns`
	pgSetTurn = `INSERT INTO {s}.dal_job_turns (project, served) SELECT * FROM unnest($1::text[], $2::bigint[])
ON CONFLICT (project) DO UPDATE SET served = excluded.served`
	pgDropJobs  = `DELETE FROM {s}.dal_jobs WHERE id = ANY($1) AND lease_expires <= now()`
	pgStartJobs = `UPDATE {s}.dal_jobs SET state = 'running', started_at = now() WHERE id = ANY($1) AND state = 'queued'`
	pgJobState  = `SELECT state FROM {s}.dal_jobs WHERE id = $1`
	// pgFinish ends a job, durably (pgDurable): a crash that took the end
	// back would bring the job back running, holding its slot and its ID
	// until its lease passed. Its WAL flush also carries the releases of
	// the job's locks that Finish sent just before.
	pgFinish = `WITH d AS (DELETE FROM {s}.dal_jobs WHERE id = $1 RETURNING id) SELECT pg_notify($2, $3), ` + pgDurable + ` FROM d`

	// pgCommitManifest is durable (pgDurable) before WriteAtomic reports
	// it and deletes the superseded version: a crash that took it back
	// would leave the manifest naming that deleted version.
	pgCommitManifest = `WITH g AS (SELECT l.lock_id FROM {s}.dal_locks l WHERE l.token = $1 AND l.lock_id = $2 AND l.mode = 'write' AND l.lease_expires > now() FOR UPDATE)
INSERT INTO {s}.dal_manifest AS m (lock_id, name, path, fence, state, committed_at)
SELECT g.lock_id, $3, $4, $5, 'committed', now() FROM g
ON CONFLICT (lock_id, name) DO UPDATE SET path = excluded.path, fence = excluded.fence, state = 'committed', committed_at = excluded.committed_at
WHERE m.fence <= excluded.fence
RETURNING committed_at, ` + pgDurable
	pgHoldsWrite = `SELECT EXISTS (SELECT 1 FROM {s}.dal_locks WHERE token = $1 AND lock_id = $2 AND mode = 'write' AND lease_expires > now())`
	pgManifest   = `SELECT path, fence, state, committed_at FROM {s}.dal_manifest WHERE lock_id = $1 AND name = $2`

	pgListAudit = leasedb.PGAudit
)

// inSchema puts schema in place of {s}.
func inSchema(schema, sql string) string { return leasedb.InSchema(schema, sql) }
