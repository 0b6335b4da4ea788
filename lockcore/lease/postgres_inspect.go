// The monitors' read-only listing of a PostgreSQL lease schema.

package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func (p *pgStore) snapshot(ctx context.Context) (*Snapshot, error) {
	return inspectPostgres(ctx, p.pool, p.schema)
}

func (p *pgStore) audit(ctx context.Context, limit int) ([]AuditRecord, error) {
	rows, err := p.pool.Query(ctx, p.q(pgListAudit), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanPGAudit)
}

func scanPGAudit(row pgx.CollectableRow) (AuditRecord, error) {
	var a AuditRecord
	var lockID, mode string
	if err := row.Scan(&lockID, &a.Actor, &a.Reason, &a.VictimOwner, &mode, &a.VictimFence, &a.Fence, &a.At); err != nil {
		return a, err
	}
	a.Resource = resourceOf(lockID)
	a.VictimMode, _ = parseMode(mode)
	return a, nil
}

// Querier is what InspectPostgres reads with: a *pgxpool.Pool, a *pgx.Conn
// or a pgx.Tx.
type Querier interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// InspectPostgres reads every lease holder and waiter, the jobs and the
// newest audit records from schema (DefaultSchema if empty), in one round
// trip and without creating or locking anything: what a monitor polls. A
// database without the schema gives an error wrapping ErrNoSchema.
func InspectPostgres(ctx context.Context, q Querier, schema string) (*Snapshot, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if !schemaName.MatchString(schema) {
		return nil, fmt.Errorf("lease: bad schema %q", schema)
	}
	s, err := inspectPostgres(ctx, q, schema)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined table, schema
		return nil, fmt.Errorf("lease: schema %s: %w", schema, ErrNoSchema)
	}
	return s, err
}

func inspectPostgres(ctx context.Context, q Querier, schema string) (s *Snapshot, err error) {
	b := &pgx.Batch{}
	b.Queue(pgNow)
	b.Queue(inSchema(schema, pgListLocks))
	b.Queue(inSchema(schema, pgListWaiter))
	b.Queue(inSchema(schema, pgJobs))
	b.Queue(inSchema(schema, pgListAudit), auditListed)
	br := q.SendBatch(ctx, b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	s = &Snapshot{}
	if err := br.QueryRow().Scan(&s.Now); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var r listedLock
		var md string
		if err := rows.Scan(&r.lockID, &r.mode, &r.owner, &r.fence, &r.leaseExpires, &r.heartbeat, &r.grantedAt, &r.graceMS, &md, &r.jobActive); err != nil {
			rows.Close()
			return nil, err
		}
		r.metadata = []byte(md)
		s.Locks = append(s.Locks, r.info(s.Now))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var w listedWaiter
		if err := rows.Scan(&w.lockID, &w.mode, &w.owner, &w.since, &w.heartbeat, &w.expires); err != nil {
			rows.Close()
			return nil, err
		}
		s.Locks = append(s.Locks, w.info())
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = br.Query()
	if err != nil {
		return nil, err
	}
	jobs, err := pgx.CollectRows(rows, scanPGJob)
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		s.Jobs = append(s.Jobs, j.info())
	}
	rows, err = br.Query()
	if err != nil {
		return nil, err
	}
	if s.Audit, err = pgx.CollectRows(rows, scanPGAudit); err != nil {
		return nil, err
	}
	finish(s.Locks, s.Now)
	return s, nil
}

// unmarshalMetadata decodes a metadata column; bad JSON gives nil.
func unmarshalMetadata(b []byte) map[string]any {
	var md map[string]any
	if len(b) > 0 && json.Unmarshal(b, &md) != nil {
		return nil
	}
	return md
}
