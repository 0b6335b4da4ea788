// The monitors' read-only listing of a SQLite lease file.

package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

func (s *sqliteStore) snapshot(ctx context.Context) (*Snapshot, error) {
	return inspectSQLite(ctx, s.db)
}

func (s *sqliteStore) audit(ctx context.Context, limit int) ([]AuditRecord, error) {
	return readSQLiteAudit(ctx, s.db, limit)
}

func readSQLiteAudit(ctx context.Context, q sqlQuerier, limit int) ([]AuditRecord, error) {
	rows, err := q.QueryContext(ctx, sqListAudit, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		var a AuditRecord
		var lockID, mode, at string
		if err := rows.Scan(&lockID, &a.Actor, &a.Reason, &a.VictimOwner, &mode, &a.VictimFence, &a.Fence, &at); err != nil {
			return nil, err
		}
		a.Resource, a.At = resourceOf(lockID), parseTime(at)
		a.VictimMode, _ = parseMode(mode)
		out = append(out, a)
	}
	return out, rows.Err()
}

// InspectSQLite reads every lease holder and waiter, the jobs and the
// newest audit records from the SQLite file at path, read-only: it creates
// no file and no table (a missing file, or one without the tables, gives
// an error wrapping ErrNoSchema) and takes no write lock. Like any reader
// of a WAL database, it may leave SQLite's -wal and -shm side files.
func InspectSQLite(ctx context.Context, path string) (*Snapshot, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lease: %s does not exist: %w", abs, ErrNoSchema)
	} else if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	db, err := sql.Open("sqlite", sqliteDSN(abs, true))
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
	return inspectSQLite(ctx, db)
}

// inspectSQLite reads a Snapshot in one read transaction, so its parts agree.
func inspectSQLite(ctx context.Context, db *sql.DB) (*Snapshot, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var nowText string
	if err := tx.QueryRowContext(ctx, sqliteNow).Scan(&nowText); err != nil {
		return nil, err
	}
	s := &Snapshot{Now: parseTime(nowText)}
	rows, err := tx.QueryContext(ctx, sqListLocks, nowText)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var r listedLock
		var lease, beat, granted, md string
		if err := rows.Scan(&r.lockID, &r.mode, &r.owner, &r.fence, &lease, &beat, &granted, &r.graceMS, &md, &r.jobActive); err != nil {
			rows.Close()
			return nil, err
		}
		r.leaseExpires, r.heartbeat, r.grantedAt, r.metadata = parseTime(lease), parseTime(beat), parseTime(granted), []byte(md)
		s.Locks = append(s.Locks, r.info(s.Now))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, sqListWaiter, nowText)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var w listedWaiter
		var since, beat, expires string
		if err := rows.Scan(&w.lockID, &w.mode, &w.owner, &since, &beat, &expires); err != nil {
			rows.Close()
			return nil, err
		}
		w.since, w.heartbeat, w.expires = parseTime(since), parseTime(beat), parseTime(expires)
		s.Locks = append(s.Locks, w.info())
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	jobs, err := readSQLiteJobs(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		s.Jobs = append(s.Jobs, j.info())
	}
	if s.Audit, err = readSQLiteAudit(ctx, tx, auditListed); err != nil {
		return nil, err
	}
	finish(s.Locks, s.Now)
	return s, nil
}
