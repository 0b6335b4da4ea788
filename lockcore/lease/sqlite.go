package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"modernc.org/sqlite" // the "sqlite" database/sql driver: pure Go
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/locktop/locktop/internal/leasedb"
	"github.com/locktop/locktop/lockcore/internal/realpath"
)

// OpenSQLite returns a Manager whose locks live in the SQLite file at path
// (created if missing), in WAL mode, for one node: the single-node default
// of seed 004. Every write is one BEGIN IMMEDIATE transaction: under WAL a
// deferred transaction that reads and then writes fails with SQLITE_BUSY
// whatever the busy timeout. Times are SQLite's own clock, in
// milliseconds. Managers of one process on one file take turns in the
// process (no SQLITE_BUSY between them) and wake each other on release;
// other processes wait on SQLite's busy timeout and retry on their backoff.
// Commits use synchronous=FULL, so a fence once issued is never issued
// again, even after a power cut.
func OpenSQLite(ctx context.Context, path string, opts Options) (*Manager, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	db, err := sql.Open("sqlite", sqliteDSN(abs, false))
	if err != nil {
		return nil, fmt.Errorf("lease: opening %s: %w", abs, err)
	}
	db.SetMaxOpenConns(4)
	file := realpath.Of(abs) // one file through a symlink is one file: its Managers take turns and wake each other
	s := &sqliteStore{db: db, path: file, file: sharedFile(file)}
	err = s.write(ctx, func(tx *sql.Tx) error {
		for _, ddl := range sqliteDDL {
			if _, err := tx.ExecContext(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.close()
		return nil, fmt.Errorf("lease: creating the tables in %s: %w", abs, err)
	}
	return newManager(s, opts), nil
}

// sqliteDSN is the driver's DSN for the file at abs: a file: URI (so any
// path works), read-only for monitors.
func sqliteDSN(abs string, readOnly bool) string {
	u := "file:" + (&url.URL{Path: abs}).EscapedPath()
	if readOnly {
		return u + "?mode=ro&_pragma=busy_timeout(5000)"
	}
	return u + "?_pragma=busy_timeout(" + strconv.FormatInt(sqliteBusy.Milliseconds(), 10) + ")&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
}

// sqliteBusy is how long a write waits for another process's writer to
// let go of the file (SQLite's busy timeout). Tests shorten it.
var sqliteBusy = 10 * time.Second

// sqliteFile is what the Managers of one process share about one file:
// their turn to write, and their wake-ups.
type sqliteFile struct {
	write sync.Mutex
	h     *hub
	refs  int
}

var sqliteFiles = struct {
	sync.Mutex
	m map[string]*sqliteFile
}{m: map[string]*sqliteFile{}}

func sharedFile(abs string) *sqliteFile {
	sqliteFiles.Lock()
	defer sqliteFiles.Unlock()
	f := sqliteFiles.m[abs]
	if f == nil {
		f = &sqliteFile{h: newHub()}
		sqliteFiles.m[abs] = f
	}
	f.refs++
	return f
}

// sqliteStore keeps the tables in a SQLite file.
type sqliteStore struct {
	db   *sql.DB
	path string
	file *sqliteFile
	once sync.Once
}

func (s *sqliteStore) hub() *hub { return s.file.h }

// where is the file's absolute path with no symbolic link (realpath.Of), as
// the Managers of the process share it (sharedFile).
func (s *sqliteStore) where() string { return "sqlite:" + s.path }

func (s *sqliteStore) close() error {
	var err error
	s.once.Do(func() {
		err = s.db.Close()
		sqliteFiles.Lock()
		if s.file.refs--; s.file.refs == 0 {
			delete(sqliteFiles.m, s.path)
		}
		sqliteFiles.Unlock()
	})
	return err
}

// write runs fn in one BEGIN IMMEDIATE transaction, this process's writers
// taking turns. A file another process kept locked past the busy timeout
// is ErrBusy.
func (s *sqliteStore) write(ctx context.Context, fn func(*sql.Tx) error) error {
	s.file.write.Lock()
	defer s.file.write.Unlock()
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return busy(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return busy(err)
	}
	return busy(tx.Commit())
}

// busy wraps SQLITE_BUSY (and its extended codes) with ErrBusy.
func busy(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return err
}

// now reads SQLite's clock inside tx.
func sqliteClock(ctx context.Context, tx *sql.Tx) (string, time.Time, error) {
	var text string
	if err := tx.QueryRowContext(ctx, sqliteNow).Scan(&text); err != nil {
		return "", time.Time{}, err
	}
	t, err := time.Parse(sqliteTime, text)
	return text, t, err
}

func fmtTime(t time.Time) string { return t.UTC().Format(sqliteTime) }

func parseTime(s string) time.Time { return leasedb.ParseTime(s) }

// errNothing rolls back an attempt that writes nothing.
var errNothing = errors.New("nothing to write")

// acquire is attempt: SQLite has no round trips to save.
func (s *sqliteStore) acquire(ctx context.Context, lockID string, _ *fastAcquire, plan func(*state) (*change, error)) (*applied, error) {
	return s.attempt(ctx, lockID, plan)
}

func (s *sqliteStore) attempt(ctx context.Context, lockID string, plan func(*state) (*change, error)) (*applied, error) {
	res := &applied{}
	var ch *change
	err := s.write(ctx, func(tx *sql.Tx) error {
		nowText, now, err := sqliteClock(ctx, tx)
		if err != nil {
			return err
		}
		st := &state{now: now}
		if _, err := tx.ExecContext(ctx, sqEnsureResource, lockID); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, sqFence, lockID).Scan(&st.fence); err != nil {
			return err
		}
		if err := readSQLiteState(ctx, tx, lockID, nowText, st); err != nil {
			return err
		}
		ch, err = plan(st)
		if err != nil {
			return err
		}
		if ch.empty() {
			return errNothing
		}
		newFence := int64(0)
		if ch.grant != nil {
			newFence = st.fence + 1
		}
		for _, v := range ch.victims {
			var id, owner, mode string
			var fence int64
			err := tx.QueryRowContext(ctx, sqVictim, v.token, nowText).Scan(&id, &owner, &mode, &fence)
			if errors.Is(err, sql.ErrNoRows) {
				return errRetry
			}
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, sqAudit, id, nowText, ch.actor, ch.reason, owner, mode, fence, newFence); err != nil {
				return err
			}
		}
		if g := ch.grant; g != nil {
			if err := tx.QueryRowContext(ctx, sqBumpFence, lockID).Scan(&res.fence); err != nil {
				return err
			}
			expires := fmtTime(now.Add(g.lease))
			if g.upgrade {
				var granted string
				if err := tx.QueryRowContext(ctx, sqUpgrade, lockID, nowText, g.token, res.fence, expires).Scan(&granted); err != nil {
					return err
				}
				res.grantedAt = parseTime(granted)
			} else {
				if _, err := tx.ExecContext(ctx, sqGrant, lockID, nowText, g.token, res.fence, g.mode.String(), g.owner,
					expires, g.grace.Milliseconds()); err != nil {
					return err
				}
				res.grantedAt = now
			}
			res.granted, res.leaseExpires = true, parseTime(expires)
		}
		if w := ch.waiter; w != nil {
			if _, err := tx.ExecContext(ctx, sqUpsertWaiter, lockID, nowText, w.id, w.mode.String(), w.owner,
				fmtTime(now.Add(w.ttl))); err != nil {
				return err
			}
		}
		if ch.dropWaiter != "" {
			if _, err := tx.ExecContext(ctx, sqDeleteWaiter, ch.dropWaiter); err != nil {
				return err
			}
		}
		for _, id := range ch.purge {
			if _, err := tx.ExecContext(ctx, sqPurgeWaiter, id, nowText); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errNothing) {
		return &applied{}, nil
	}
	if err != nil {
		return nil, err
	}
	if ch.wake {
		s.file.h.wake(lockID)
	}
	return res, nil
}

func readSQLiteState(ctx context.Context, tx *sql.Tx, lockID, nowText string, st *state) error {
	rows, err := tx.QueryContext(ctx, sqHolders, lockID, nowText)
	if err != nil {
		return err
	}
	for rows.Next() {
		var h holder
		var mode, lease, beat string
		if err := rows.Scan(&h.token, &mode, &h.owner, &h.fence, &lease, &beat, &h.jobActive); err != nil {
			rows.Close()
			return err
		}
		if h.mode, err = parseMode(mode); err != nil {
			rows.Close()
			return err
		}
		h.leaseExpires, h.heartbeat = parseTime(lease), parseTime(beat)
		st.holders = append(st.holders, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = tx.QueryContext(ctx, sqWaiters, lockID)
	if err != nil {
		return err
	}
	for rows.Next() {
		var w waiter
		var mode, expires string
		if err := rows.Scan(&w.id, &mode, &expires); err != nil {
			rows.Close()
			return err
		}
		if w.mode, err = parseMode(mode); err != nil {
			rows.Close()
			return err
		}
		w.expires = parseTime(expires)
		st.waiters = append(st.waiters, w)
	}
	rows.Close()
	return rows.Err()
}

func (s *sqliteStore) release(ctx context.Context, lockID, token string) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, sqRelease, token)
		if err == nil {
			n, err = r.RowsAffected()
		}
		return err
	})
	if err == nil && n == 1 {
		s.file.h.wake(lockID)
	}
	return n == 1, err
}

func (s *sqliteStore) renew(ctx context.Context, lease time.Duration, tokens, jobs []string) (renewed, error) {
	r := renewed{tokens: map[string]bool{}, jobs: map[string]bool{}}
	err := s.write(ctx, func(tx *sql.Tx) error {
		nowText, now, err := sqliteClock(ctx, tx)
		if err != nil {
			return err
		}
		expires := fmtTime(now.Add(lease))
		for _, set := range []struct {
			sql  string
			ids  []string
			into map[string]bool
		}{{sqRenewLock, tokens, r.tokens}, {sqRenewJob, jobs, r.jobs}} {
			for _, id := range set.ids {
				res, err := tx.ExecContext(ctx, set.sql, id, nowText, expires)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n == 1 {
					set.into[id] = true
				}
			}
		}
		return nil
	})
	return r, err
}

func (s *sqliteStore) setMetadata(ctx context.Context, token string, md []byte) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, sqSetMetadata, token, string(md))
		if err == nil {
			n, err = r.RowsAffected()
		}
		return err
	})
	return n == 1, err
}

func (s *sqliteStore) dropWaiter(ctx context.Context, lockID, id string) error {
	var mode string
	err := s.write(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, sqDropWaiter, id).Scan(&mode)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	if err == nil && mode == Write.String() {
		s.file.h.wake(lockID)
	}
	return err
}

func (s *sqliteStore) enqueue(ctx context.Context, j jobRow, lease time.Duration) (bool, error) {
	ok := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		nowText, now, err := sqliteClock(ctx, tx)
		if err != nil {
			return err
		}
		var alive int
		if err := tx.QueryRowContext(ctx, sqJobAlive, j.id, nowText).Scan(&alive); err != nil {
			return err
		}
		if alive > 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, sqEnqueue, j.id, nowText, j.owner, j.project, j.mapID, j.kind, j.process,
			fmtTime(now.Add(lease)))
		ok = err == nil
		return err
	})
	return ok, err
}

func (s *sqliteStore) schedule(ctx context.Context, plan func(time.Time, []jobRow, map[string]int64) jobPlan) ([]jobRow, error) {
	var out []jobRow
	var changed bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		nowText, now, err := sqliteClock(ctx, tx)
		if err != nil {
			return err
		}
		jobs, err := readSQLiteJobs(ctx, tx)
		if err != nil {
			return err
		}
		served := map[string]int64{}
		rows, err := tx.QueryContext(ctx, sqTurns)
		if err != nil {
			return err
		}
		for rows.Next() {
			var project string
			var turn int64
			if err := rows.Scan(&project, &turn); err != nil {
				rows.Close()
				return err
			}
			served[project] = turn
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		pl := plan(now, jobs, served)
		for project, turn := range pl.served {
			if _, err := tx.ExecContext(ctx, sqSetTurn, project, turn); err != nil {
				return err
			}
		}
		for _, id := range pl.drop {
			if _, err := tx.ExecContext(ctx, sqDropJob, id, nowText); err != nil {
				return err
			}
		}
		for _, id := range pl.start {
			if _, err := tx.ExecContext(ctx, sqStartJob, id, nowText); err != nil {
				return err
			}
		}
		out, changed = pl.after(jobs), pl.changed()
		return nil
	})
	if err == nil && changed {
		s.file.h.wakeAll(jobsKey)
	}
	return out, err
}

func readSQLiteJobs(ctx context.Context, tx *sql.Tx) ([]jobRow, error) {
	jobs, err := leasedb.ReadSQLiteJobs(ctx, tx)
	return convert(jobs, jobRowOf), err
}

func (s *sqliteStore) jobRunning(ctx context.Context, id string) (running, exists bool, err error) {
	var state string
	err = s.db.QueryRowContext(ctx, sqJobState, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, nil
	}
	return isRunning(state), err == nil, err
}

func (s *sqliteStore) finish(ctx context.Context, id string) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, sqFinishJob, id)
		if err == nil {
			n, err = r.RowsAffected()
		}
		return err
	})
	if err == nil && n == 1 {
		s.file.h.wakeAll(jobsKey)
	}
	return n == 1, err
}

func (s *sqliteStore) commitManifest(ctx context.Context, token, lockID, name, path string, fence int64) (time.Time, error) {
	var at time.Time
	err := s.write(ctx, func(tx *sql.Tx) error {
		nowText, now, err := sqliteClock(ctx, tx)
		if err != nil {
			return err
		}
		var held int
		if err := tx.QueryRowContext(ctx, sqHeldForWrite, token, nowText, lockID).Scan(&held); err != nil {
			return err
		}
		if held == 0 {
			return errManifestRefused
		}
		var last int64
		err = tx.QueryRowContext(ctx, sqManifestFence, lockID, name).Scan(&last)
		switch {
		case err == nil && last > fence:
			return errManifestRefused
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, sqCommitManifest, lockID, nowText, name, path, fence); err != nil {
			return err
		}
		at = now
		return nil
	})
	return at, err
}

func (s *sqliteStore) manifest(ctx context.Context, lockID, name string) (ManifestEntry, bool, error) {
	e := ManifestEntry{Name: name}
	var at string
	err := s.db.QueryRowContext(ctx, sqManifest, lockID, name).Scan(&e.Path, &e.Fence, &e.State, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return e, false, nil
	}
	e.Committed = parseTime(at)
	return e, err == nil, err
}

func (s *sqliteStore) holdsWrite(ctx context.Context, token, lockID string) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, sqHoldsWrite, token, lockID).Scan(&n)
	return n > 0, err
}
