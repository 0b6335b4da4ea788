package lease

import (
	"time"
)

// Info is one holder or waiter of a lease, as Locks and the Inspect
// functions list them.
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

// Snapshot is everything a monitor shows of lease locks at one moment.
type Snapshot struct {
	Now   time.Time     // the database's clock
	Locks []Info        // by resource in lock order; holders, then waiters by since
	Jobs  []JobInfo     // by arrival
	Audit []AuditRecord // newest first, at most 100
}

// finish completes a listing read at now (the database's clock): the
// order, the ages and the waiters' positions.
func finish(infos []Info, now time.Time) {
	sortInfos(infos)
	pos := 0
	for i := range infos {
		in := &infos[i]
		in.LeaseLeft, in.HeartbeatAge = in.LeaseExpires.Sub(now), now.Sub(in.Heartbeat)
		switch {
		case in.Granted:
			pos = 0
		case i > 0 && !infos[i-1].Granted && infos[i-1].Resource == in.Resource:
			pos++
			in.Position = pos
		default:
			pos = 1
			in.Position = pos
		}
	}
}

// auditListed is how many audit records a Snapshot carries.
const auditListed = 100

// listedLock is a dal_locks row as listings read it.
type listedLock struct {
	lockID, mode, owner     string
	fence                   int64
	leaseExpires, heartbeat time.Time
	grantedAt               time.Time
	graceMS                 int64
	metadata                []byte
	jobActive               bool
}

func (r listedLock) info(now time.Time) Info {
	mode, _ := parseMode(r.mode)
	h := holder{leaseExpires: r.leaseExpires, heartbeat: r.heartbeat, jobActive: r.jobActive}
	return Info{
		Resource: resourceOf(r.lockID), Mode: mode, Owner: r.owner, Granted: true, Fence: r.fence,
		LeaseExpires: r.leaseExpires, Heartbeat: r.heartbeat, Since: r.grantedAt,
		Metadata: unmarshalMetadata(r.metadata),
		Stale:    h.stale(now, time.Duration(r.graceMS)*time.Millisecond),
	}
}

// listedWaiter is a dal_waiters row as listings read it.
type listedWaiter struct {
	lockID, mode, owner       string
	since, heartbeat, expires time.Time
}

func (w listedWaiter) info() Info {
	mode, _ := parseMode(w.mode)
	return Info{Resource: resourceOf(w.lockID), Mode: mode, Owner: w.owner, LeaseExpires: w.expires,
		Heartbeat: w.heartbeat, Since: w.since}
}

func (j jobRow) info() JobInfo {
	return JobInfo{ID: j.id, Project: j.project, Map: j.mapID, Kind: j.kind, Owner: j.owner, Process: j.process,
		Running: j.running, Queued: j.queued, Started: j.started, LeaseExpires: j.leaseExpires, Heartbeat: j.heartbeat}
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
