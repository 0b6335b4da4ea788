package lease

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/leasedb"
)

// Info is one holder or waiter of a lease, as Manager.Locks lists it.
type Info struct {
	Resource Resource
	Mode     Mode
	Owner    string // the holder's or waiter's Owner; "job:ID" for a job's lock
	Granted  bool   // a holder; false: a waiter
	Fence    int64  // holders only
	// LeaseExpires is when a holder's lease passes, or when a waiter's row
	// lapses unless the waiter retries.
	LeaseExpires time.Time
	Heartbeat    time.Time // the last heartbeat (holders) or retry (waiters)
	Since        time.Time // granted (holders) or began waiting (waiters)
	// LeaseLeft is LeaseExpires less the database's clock at the listing:
	// negative once the lease (or a waiter's row) has passed.
	LeaseLeft time.Duration
	// HeartbeatAge is how long ago, by the database's clock at the
	// listing, the last heartbeat (or retry) was.
	HeartbeatAge time.Duration
	// Position is a waiter's place among the resource's waiters, by Since
	// (1 first); 0 for holders.
	Position int
	Metadata map[string]any
	// Stale: the holder's lease has passed, its heartbeat is older than
	// its own Grace (recorded with the grant) and no active job claims it
	// (its owner's job, queued before the grant), all by the database's clock: a Manager with the same Grace
	// would recover it.
	Stale bool
}

// JobInfo is one queued or running job.
type JobInfo struct {
	ID, Project, Map, Kind string
	Owner                  string // what its locks carry: "job:ID"
	Process                string // the Owner of the Manager that queued it
	Running                bool
	Queued, Started        time.Time // Started is zero while queued
	LeaseExpires           time.Time
	Heartbeat              time.Time
	// LeaseLeft is LeaseExpires less the database's clock at the listing:
	// negative once a running job's slot lease has passed (its slot is
	// the store's to give again, whatever the job still does).
	LeaseLeft time.Duration
}

// AuditRecord is one stale recovery (seed 004 §3.3, §8.2): who took over
// or freed which resource, when and why, from which holder.
type AuditRecord struct {
	Resource    Resource
	Actor       string // the Owner of the acquirer, or RecoverStale's actor
	Reason      string // "lease expired" for a takeover by Acquire
	VictimOwner string
	VictimMode  Mode
	VictimFence int64
	Fence       int64 // the taker's new fence; 0 for RecoverStale
	At          time.Time
}

// The listings read through internal/leasedb, which the monitor's lease
// source shares: the rows come in lock order with their ages, positions and
// staleness; here they become typed.

func (p *pgStore) list(ctx context.Context) (*leasedb.Listing, error) {
	return leasedb.ReadPostgres(ctx, p.pool, p.schema)
}

func (p *pgStore) audit(ctx context.Context, limit int) ([]leasedb.Audit, error) {
	rows, err := p.pool.Query(ctx, p.q(pgListAudit), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, leasedb.ScanPGAudit)
}

func (s *sqliteStore) list(ctx context.Context) (*leasedb.Listing, error) {
	return leasedb.ReadSQLite(ctx, s.db)
}

func (s *sqliteStore) audit(ctx context.Context, limit int) ([]leasedb.Audit, error) {
	return leasedb.ReadSQLiteAudit(ctx, s.db, limit)
}

func infoOf(e leasedb.Entry) Info {
	mode, _ := parseMode(e.Mode)
	in := Info{Resource: resourceOf(e.LockID), Mode: mode, Owner: e.Owner, Granted: e.Granted, Fence: e.Fence,
		LeaseExpires: e.LeaseExpires, Heartbeat: e.Heartbeat, Since: e.Since, LeaseLeft: e.LeaseLeft,
		HeartbeatAge: e.HeartbeatAge, Position: e.Position, Stale: e.Stale}
	if e.Granted {
		in.Metadata = unmarshalMetadata(e.Metadata)
	}
	return in
}

func jobInfoOf(now time.Time) func(leasedb.Job) JobInfo {
	return func(j leasedb.Job) JobInfo {
		return JobInfo{ID: j.ID, Project: j.Project, Map: j.Map, Kind: j.Kind, Owner: j.Owner, Process: j.Process,
			Running: j.Running, Queued: j.Queued, Started: j.Started, LeaseExpires: j.LeaseExpires, Heartbeat: j.Heartbeat,
			LeaseLeft: j.LeaseExpires.Sub(now)}
	}
}

func auditOf(a leasedb.Audit) AuditRecord {
	mode, _ := parseMode(a.VictimMode)
	return AuditRecord{Resource: resourceOf(a.LockID), Actor: a.Actor, Reason: a.Reason, VictimOwner: a.VictimOwner,
		VictimMode: mode, VictimFence: a.VictimFence, Fence: a.Fence, At: a.At}
}

// resourceOf parses a stored lock_id; one that does not parse (written by
// something else) keeps its text as the ID, with no level.
func resourceOf(lockID string) Resource {
	r, err := ParseResource(lockID)
	if err != nil {
		return Resource{ID: lockID}
	}
	return r
}

// unmarshalMetadata decodes a metadata column; bad JSON gives nil.
func unmarshalMetadata(md string) map[string]any {
	var out map[string]any
	if md != "" && json.Unmarshal([]byte(md), &out) != nil {
		return nil
	}
	return out
}
