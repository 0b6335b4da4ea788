package lease

import "github.com/locktop/locktop/internal/leasedb"

// The SQLite statements. Times are ISO 8601 text with milliseconds, as
// seed 004 §3.2 stores them ("2006-01-02T15:04:05.000Z"), all from
// SQLite's own clock (sqliteNow), so they compare as text; ?2 is that now
// wherever a statement compares times.

// sqliteNow reads SQLite's clock, to the millisecond; sqliteTime is the
// layout of every stored time.
const (
	sqliteNow  = leasedb.SQLiteNow
	sqliteTime = leasedb.SQLiteTime
)

var sqliteDDL = []string{
	`CREATE TABLE IF NOT EXISTS dal_resources (
		lock_id TEXT PRIMARY KEY,
		fence   INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE TABLE IF NOT EXISTS dal_locks (
		token         TEXT PRIMARY KEY,
		lock_id       TEXT NOT NULL,
		fence         INTEGER NOT NULL,
		mode          TEXT NOT NULL,
		owner         TEXT NOT NULL,
		lease_expires TEXT NOT NULL,
		heartbeat_ts  TEXT NOT NULL,
		granted_at    TEXT NOT NULL,
		grace_ms      INTEGER NOT NULL,
		metadata      TEXT NOT NULL DEFAULT '{}',
		UNIQUE (lock_id, fence)
	)`,
	`CREATE TABLE IF NOT EXISTS dal_waiters (
		id           TEXT PRIMARY KEY,
		lock_id      TEXT NOT NULL,
		mode         TEXT NOT NULL,
		owner        TEXT NOT NULL,
		since        TEXT NOT NULL,
		heartbeat_ts TEXT NOT NULL,
		expires      TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS dal_waiters_lock_id ON dal_waiters (lock_id)`,
	`CREATE TABLE IF NOT EXISTS dal_audit (
		id           INTEGER PRIMARY KEY AUTOINCREMENT,
		lock_id      TEXT NOT NULL,
		actor        TEXT NOT NULL,
		reason       TEXT NOT NULL,
		victim_owner TEXT NOT NULL,
		victim_mode  TEXT NOT NULL,
		victim_fence INTEGER NOT NULL,
		fence        INTEGER NOT NULL,
		at           TEXT NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS dal_jobs (
		id            TEXT PRIMARY KEY,
		owner         TEXT NOT NULL,
		project       TEXT NOT NULL,
		map           TEXT NOT NULL,
		kind          TEXT NOT NULL,
		process       TEXT NOT NULL,
		state         TEXT NOT NULL,
		seq           INTEGER NOT NULL,
		queued_at     TEXT NOT NULL,
		started_at    TEXT,
		lease_expires TEXT NOT NULL,
		heartbeat_ts  TEXT NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS dal_jobs_owner ON dal_jobs (owner)`,
	`CREATE TABLE IF NOT EXISTS dal_job_turns (
		project TEXT PRIMARY KEY,
		served  INTEGER NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS dal_manifest (
		lock_id      TEXT NOT NULL,
		name         TEXT NOT NULL,
		path         TEXT NOT NULL,
		fence        INTEGER NOT NULL,
		state        TEXT NOT NULL,
		committed_at TEXT NOT NULL,
		PRIMARY KEY (lock_id, name)
	)`,
}

// sqliteJobClaim: a live running job's claim on its locks; ?2 is now.
const sqliteJobClaim = leasedb.SQLiteJobClaim

const (
	sqEnsureResource = `INSERT OR IGNORE INTO dal_resources (lock_id) VALUES (?1)`
	sqFence          = `SELECT fence FROM dal_resources WHERE lock_id = ?1`
	sqHolders        = `SELECT l.token, l.mode, l.owner, l.fence, l.lease_expires, l.heartbeat_ts, ` + sqliteJobClaim +
		` FROM dal_locks l WHERE l.lock_id = ?1`
	sqWaiters   = `SELECT id, mode, expires FROM dal_waiters WHERE lock_id = ?1`
	sqBumpFence = `UPDATE dal_resources SET fence = fence + 1 WHERE lock_id = ?1 RETURNING fence`
	sqGrant     = `INSERT INTO dal_locks (token, lock_id, fence, mode, owner, lease_expires, heartbeat_ts, granted_at, grace_ms)
VALUES (?3, ?1, ?4, ?5, ?6, ?7, ?2, ?2, ?8)`
	sqUpgrade = `UPDATE dal_locks SET mode = 'write', fence = ?4, lease_expires = ?5, heartbeat_ts = ?2 WHERE token = ?3 AND lock_id = ?1
RETURNING granted_at`
	sqVictim = `DELETE FROM dal_locks AS l WHERE l.token = ?1 AND l.lease_expires < ?2 AND NOT ` + sqliteJobClaim +
		` RETURNING lock_id, owner, mode, fence`
	sqAudit = `INSERT INTO dal_audit (lock_id, actor, reason, victim_owner, victim_mode, victim_fence, fence, at)
VALUES (?1, ?3, ?4, ?5, ?6, ?7, ?8, ?2)`
	sqUpsertWaiter = `INSERT INTO dal_waiters (id, lock_id, mode, owner, since, heartbeat_ts, expires) VALUES (?3, ?1, ?4, ?5, ?2, ?2, ?6)
ON CONFLICT (id) DO UPDATE SET heartbeat_ts = excluded.heartbeat_ts, expires = excluded.expires`
	sqDeleteWaiter = `DELETE FROM dal_waiters WHERE id = ?1`
	sqPurgeWaiter  = `DELETE FROM dal_waiters WHERE id = ?1 AND expires <= ?2`
	sqRelease      = `DELETE FROM dal_locks WHERE token = ?1`
	sqDropWaiter   = `DELETE FROM dal_waiters WHERE id = ?1 RETURNING mode`
	sqRenewLock    = `UPDATE dal_locks SET lease_expires = ?3, heartbeat_ts = ?2 WHERE token = ?1 AND lease_expires > ?2`
	sqRenewJob     = `UPDATE dal_jobs SET lease_expires = ?3, heartbeat_ts = ?2 WHERE id = ?1 AND lease_expires > ?2`
	sqSetMetadata  = `UPDATE dal_locks SET metadata = ?2 WHERE token = ?1`

	sqJobAlive = `SELECT count(*) FROM dal_jobs WHERE id = ?1 AND lease_expires > ?2`
	sqEnqueue  = `INSERT OR REPLACE INTO dal_jobs (id, owner, project, map, kind, process, state, seq, queued_at, started_at, lease_expires, heartbeat_ts)
VALUES (?1, ?3, ?4, ?5, ?6, ?7, 'queued', (SELECT coalesce(max(seq), 0) + 1 FROM dal_jobs), ?2, NULL, ?8, ?2)`
	sqJobs      = leasedb.SQLiteJobs
	sqTurns     = `SELECT project, served FROM dal_job_turns`
	sqSetTurn   = `INSERT INTO dal_job_turns (project, served) VALUES (?1, ?2) ON CONFLICT (project) DO UPDATE SET served = excluded.served`
	sqDropJob   = `DELETE FROM dal_jobs WHERE id = ?1 AND lease_expires <= ?2`
	sqStartJob  = `UPDATE dal_jobs SET state = 'running', started_at = ?2 WHERE id = ?1 AND state = 'queued'`
	sqJobState  = `SELECT state FROM dal_jobs WHERE id = ?1`
	sqFinishJob = `DELETE FROM dal_jobs WHERE id = ?1`

	sqHeldForWrite   = `SELECT count(*) FROM dal_locks WHERE token = ?1 AND lock_id = ?3 AND mode = 'write' AND lease_expires > ?2`
	sqManifestFence  = `SELECT fence FROM dal_manifest WHERE lock_id = ?1 AND name = ?2`
	sqCommitManifest = `INSERT INTO dal_manifest (lock_id, name, path, fence, state, committed_at) VALUES (?1, ?3, ?4, ?5, 'committed', ?2)
ON CONFLICT (lock_id, name) DO UPDATE SET path = excluded.path, fence = excluded.fence, state = 'committed', committed_at = excluded.committed_at`
	sqHoldsWrite = `SELECT count(*) FROM dal_locks WHERE token = ?1 AND lock_id = ?2 AND mode = 'write' AND lease_expires > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`
	sqManifest   = `SELECT path, fence, state, committed_at FROM dal_manifest WHERE lock_id = ?1 AND name = ?2`
)
