package leasedb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The PostgreSQL statements of a listing. {s} stands for the schema
// (InSchema).

// PGJobClaim: a running job whose lease has not passed claims the locks of
// its owner ("job:ID") that its incarnation took: granted since it was
// queued. A job ID may be reused once its lease has passed, and the retried
// job must not protect its dead predecessor's locks from recovery. The
// alias of dal_locks is l.
const PGJobClaim = `EXISTS (SELECT 1 FROM {s}.dal_jobs j WHERE j.owner = l.owner AND j.state = 'running' AND j.lease_expires > now() AND l.granted_at >= j.queued_at)`

const (
	// PGJobs lists every job, by arrival; ScanPGJob decodes its rows.
	PGJobs = `SELECT id, owner, project, map, kind, process, state, seq, queued_at, started_at, lease_expires, heartbeat_ts FROM {s}.dal_jobs ORDER BY seq`
	// PGAudit lists the newest $1 audit records; ScanPGAudit decodes its rows.
	PGAudit = `SELECT lock_id, actor, reason, victim_owner, victim_mode, victim_fence, fence, at FROM {s}.dal_audit ORDER BY id DESC LIMIT $1`

	pgNow = `SELECT now()`
	// pgHolders reads a job's claim only for a holder whose lease has
	// passed, the only one it can keep from being Stale: a listing of live
	// leases runs no subquery per row (with 1,000 holders, one index scan
	// each made the statement six times as slow as the table's scan).
	pgHolders = `SELECT l.lock_id, l.mode, l.owner, l.fence, l.lease_expires, l.heartbeat_ts, l.granted_at, l.grace_ms, l.metadata::text,
	CASE WHEN l.lease_expires < now() THEN ` + PGJobClaim + ` ELSE false END FROM {s}.dal_locks l`
	pgWaiters = `SELECT lock_id, mode, owner, since, heartbeat_ts, expires FROM {s}.dal_waiters WHERE expires > now()`
)

// InSchema puts schema in place of {s}.
func InSchema(schema, sql string) string { return strings.ReplaceAll(sql, "{s}", schema) }

// Querier is what ReadPostgres reads with: a *pgxpool.Pool, a *pgx.Conn
// or a pgx.Tx.
type Querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ReadPostgres reads every holder and waiter, the jobs and the newest
// audit records from schema, in one round trip (one pipelined batch) and
// without creating or locking anything. A database without the schema
// gives an error wrapping ErrNoSchema.
func ReadPostgres(ctx context.Context, q Querier, schema string) (*Listing, error) {
	if !ValidSchema(schema) {
		return nil, fmt.Errorf("lease: bad schema %q", schema)
	}
	l, err := readPostgres(ctx, q, schema)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined table, schema
		return nil, fmt.Errorf("lease: schema %s: %w", schema, ErrNoSchema)
	}
	return l, err
}

func readPostgres(ctx context.Context, q Querier, schema string) (l *Listing, err error) {
	b := &pgx.Batch{}
	b.Queue(pgNow)
	b.Queue(InSchema(schema, pgHolders))
	b.Queue(InSchema(schema, pgWaiters))
	b.Queue(InSchema(schema, PGJobs))
	b.Queue(InSchema(schema, PGAudit), AuditListed)
	br := q.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	l = newListing()
	if err := br.QueryRow().Scan(&l.Now); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	var (
		lockID               string
		mode, owner, md      pgtype.DriverBytes // read in place: see interner
		fence, graceMS       int64
		expires, beat, since time.Time
		jobActive            bool
		in                   interner
	)
	_, err = pgx.ForEachRow(rows, []any{&lockID, &mode, &owner, &fence, &expires, &beat, &since, &graceMS, &md, &jobActive}, func() error {
		l.Entries = append(l.Entries, holder(lockID, in.mode(mode), in.owner(owner), fence, expires, beat, since,
			time.Duration(graceMS)*time.Millisecond, in.metadata(md), jobActive, l.Now))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	_, err = pgx.ForEachRow(rows, []any{&lockID, &mode, &owner, &since, &beat, &expires}, func() error {
		l.Entries = append(l.Entries, Entry{LockID: lockID, Mode: in.mode(mode), Owner: in.owner(owner), Since: since, Heartbeat: beat, LeaseExpires: expires})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	if l.Jobs, err = pgx.CollectRows(rows, ScanPGJob); err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	if l.Audit, err = pgx.CollectRows(rows, ScanPGAudit); err != nil {
		return nil, err
	}
	l.finish()
	return l, nil
}

// interner turns the columns that repeat across a listing's rows into
// strings without a copy per row: a mode is one of three, most grants
// carry no metadata ("{}"), and a few processes own most of the leases.
// A listing of 1,000 leases made 4,000 strings a poll, half of them these.
type interner struct {
	owners map[string]string
}

func (in *interner) mode(b []byte) string {
	for _, m := range modes {
		if string(b) == m {
			return m
		}
	}
	return string(b)
}

// modes are the modes as stored (lease's Mode.String).
var modes = [...]string{"read", "write", "upgradeable"}

func (in *interner) metadata(b []byte) string {
	if string(b) == "{}" {
		return "{}"
	}
	return string(b)
}

func (in *interner) owner(b []byte) string {
	if s, ok := in.owners[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if in.owners == nil {
		in.owners = map[string]string{}
	}
	if len(in.owners) < maxInterned { // owners all distinct (one job each): stop paying for the map
		in.owners[s] = s
	}
	return s
}

// maxInterned bounds the owners an interner keeps.
const maxInterned = 64

// ScanPGJob decodes a row of PGJobs.
func ScanPGJob(row pgx.CollectableRow) (Job, error) {
	var j Job
	var state string
	var started *time.Time
	err := row.Scan(&j.ID, &j.Owner, &j.Project, &j.Map, &j.Kind, &j.Process, &state, &j.Seq,
		&j.Queued, &started, &j.LeaseExpires, &j.Heartbeat)
	j.Running = IsRunning(state)
	if started != nil {
		j.Started = *started
	}
	return j, err
}

// ScanPGAudit decodes a row of PGAudit.
func ScanPGAudit(row pgx.CollectableRow) (Audit, error) {
	var a Audit
	err := row.Scan(&a.LockID, &a.Actor, &a.Reason, &a.VictimOwner, &a.VictimMode, &a.VictimFence, &a.Fence, &a.At)
	return a, err
}

// IsRunning reports whether a job's state column says it runs.
func IsRunning(state string) bool { return strings.EqualFold(state, "running") }
