package leasedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver
)

// The SQLite statements of a listing. Times are ISO 8601 text with
// milliseconds, as seed 004 §3.2 stores them, all from SQLite's own clock
// (SQLiteNow), so they compare as text.

// SQLiteNow reads SQLite's clock, to the millisecond.
const SQLiteNow = `SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`

// SQLiteTime is the layout of every stored time.
const SQLiteTime = "2006-01-02T15:04:05.000Z"

// SQLiteJobClaim: a live running job claims the locks its incarnation took
// (granted since it was queued), as PGJobClaim; ?2 is now.
const SQLiteJobClaim = `EXISTS (SELECT 1 FROM dal_jobs j WHERE j.owner = l.owner AND j.state = 'running' AND j.lease_expires > ?2 AND l.granted_at >= j.queued_at)`

const (
	// SQLiteJobs lists every job, by arrival (ReadSQLiteJobs).
	SQLiteJobs = `SELECT id, owner, project, map, kind, process, state, seq, queued_at, coalesce(started_at, ''), lease_expires, heartbeat_ts FROM dal_jobs ORDER BY seq`

	sqHasSchema = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dal_manifest'`
	sqWaiters   = `SELECT lock_id, mode, owner, since, heartbeat_ts, expires FROM dal_waiters WHERE expires > ?1`
	sqAudit     = `SELECT lock_id, actor, reason, victim_owner, victim_mode, victim_fence, fence, at FROM dal_audit ORDER BY id DESC LIMIT ?1`
)

// sqHolders lists every grant; its one parameter, ?1, is now. A job's
// claim is read only for a lease that has passed, as pgHolders.
var sqHolders = `SELECT l.lock_id, l.mode, l.owner, l.fence, l.lease_expires, l.heartbeat_ts, l.granted_at, l.grace_ms, l.metadata,
	CASE WHEN l.lease_expires < ?1 THEN ` + strings.ReplaceAll(SQLiteJobClaim, "?2", "?1") + ` ELSE 0 END FROM dal_locks l`

// ParseTime reads a stored time; bad text gives the zero time.
func ParseTime(s string) time.Time {
	t, _ := time.Parse(SQLiteTime, s)
	return t
}

// SQLQuerier is a *sql.DB or a *sql.Tx.
type SQLQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ReadSQLiteFile reads a Listing from the SQLite file at path, read-only:
// it creates no file and no table (a missing file, or one without the
// tables, gives an error wrapping ErrNoSchema) and takes no write lock.
// Like any reader of a WAL database, it may leave SQLite's -wal and -shm
// side files.
func ReadSQLiteFile(ctx context.Context, path string) (*Listing, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lease: %s does not exist: %w", abs, ErrNoSchema)
	} else if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("lease: opening %s: %w", abs, err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, sqHasSchema).Scan(&n); err != nil {
		return nil, fmt.Errorf("lease: reading %s: %w", abs, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("lease: %s has no lease tables: %w", abs, ErrNoSchema)
	}
	return ReadSQLite(ctx, db)
}

// ReadSQLite reads a Listing in one read transaction, so its parts agree.
func ReadSQLite(ctx context.Context, db *sql.DB) (*Listing, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var nowText string
	if err := tx.QueryRowContext(ctx, SQLiteNow).Scan(&nowText); err != nil {
		return nil, err
	}
	l := newListing()
	l.Now = ParseTime(nowText)
	rows, err := tx.QueryContext(ctx, sqHolders, nowText)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var lockID, mode, owner, expires, beat, granted, md string
		var fence, graceMS int64
		var jobActive bool
		if err := rows.Scan(&lockID, &mode, &owner, &fence, &expires, &beat, &granted, &graceMS, &md, &jobActive); err != nil {
			rows.Close()
			return nil, err
		}
		l.Entries = append(l.Entries, holder(lockID, mode, owner, fence, ParseTime(expires), ParseTime(beat), ParseTime(granted),
			time.Duration(graceMS)*time.Millisecond, md, jobActive, l.Now))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if rows, err = tx.QueryContext(ctx, sqWaiters, nowText); err != nil {
		return nil, err
	}
	for rows.Next() {
		var e Entry
		var since, beat, expires string
		if err := rows.Scan(&e.LockID, &e.Mode, &e.Owner, &since, &beat, &expires); err != nil {
			rows.Close()
			return nil, err
		}
		e.Since, e.Heartbeat, e.LeaseExpires = ParseTime(since), ParseTime(beat), ParseTime(expires)
		l.Entries = append(l.Entries, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if l.Jobs, err = ReadSQLiteJobs(ctx, tx); err != nil {
		return nil, err
	}
	if l.Audit, err = ReadSQLiteAudit(ctx, tx, AuditListed); err != nil {
		return nil, err
	}
	l.finish()
	return l, nil
}

// ReadSQLiteJobs reads every job, by arrival.
func ReadSQLiteJobs(ctx context.Context, q SQLQuerier) ([]Job, error) {
	rows, err := q.QueryContext(ctx, SQLiteJobs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		var j Job
		var state, queued, started, lease, beat string
		if err := rows.Scan(&j.ID, &j.Owner, &j.Project, &j.Map, &j.Kind, &j.Process, &state, &j.Seq,
			&queued, &started, &lease, &beat); err != nil {
			return nil, err
		}
		j.Running = IsRunning(state)
		j.Queued, j.Started, j.LeaseExpires, j.Heartbeat = ParseTime(queued), ParseTime(started), ParseTime(lease), ParseTime(beat)
		out = append(out, j)
	}
	return out, rows.Err()
}

// ReadSQLiteAudit reads the newest limit audit records, newest first.
func ReadSQLiteAudit(ctx context.Context, q SQLQuerier, limit int) ([]Audit, error) {
	rows, err := q.QueryContext(ctx, sqAudit, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Audit
	for rows.Next() {
		var a Audit
		var at string
		if err := rows.Scan(&a.LockID, &a.Actor, &a.Reason, &a.VictimOwner, &a.VictimMode, &a.VictimFence, &a.Fence, &at); err != nil {
			return nil, err
		}
		a.At = ParseTime(at)
		out = append(out, a)
	}
	return out, rows.Err()
}
