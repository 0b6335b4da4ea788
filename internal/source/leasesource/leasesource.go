package leasesource

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// Source is a source of lease locks (lockcore/lease): every holder and
// waiter with mode, lease left, heartbeat, stale flag and fence, and the
// newest audit records, read by lease.InspectPostgres or
// lease.InspectSQLite, timed by the database's clock. It is safe for
// concurrent use.
type Source struct {
	name    string
	inspect func(ctx context.Context) (*lease.Snapshot, error)
	// optional: a database that has no lease tables is an empty source, not
	// a failing one (the watched database's own schema, looked for by
	// itself); it is looked for again every optionalRecheck.
	optional bool
	mu       sync.Mutex
	absent   time.Time // when the tables were last found missing
}

// optionalRecheck is how often an optional source whose tables are
// missing looks for them again: a poll costs nothing in between.
const optionalRecheck = 30 * time.Second

// Postgres is the lease tables in schema (lease.DefaultSchema when
// "") of the database q reaches. optional: a database without them is
// an empty source (the watched database, which may hold none).
func Postgres(name string, q lease.Querier, schema string, optional bool) *Source {
	return &Source{name: name, optional: optional, inspect: func(ctx context.Context) (*lease.Snapshot, error) {
		return lease.InspectPostgres(ctx, q, schema)
	}}
}

// SQLite is the lease tables of the SQLite file at path, read-only.
func SQLite(name, path string) *Source {
	return &Source{name: name, inspect: func(ctx context.Context) (*lease.Snapshot, error) {
		return lease.InspectSQLite(ctx, path)
	}}
}

// Name names the source: "lease", "lease-sqlite", …
func (l *Source) Name() string { return l.name }

// Poll lists the leases once.
func (l *Source) Poll(ctx context.Context) (model.Snapshot, error) {
	start := time.Now()
	if l.optional {
		l.mu.Lock()
		skip := !l.absent.IsZero() && start.Sub(l.absent) < optionalRecheck
		l.mu.Unlock()
		if skip {
			return model.Snapshot{Taken: start}, nil
		}
	}
	s, err := l.inspect(ctx)
	if l.optional && errors.Is(err, lease.ErrNoSchema) {
		l.mu.Lock()
		l.absent = start
		l.mu.Unlock()
		return model.Snapshot{Taken: start}, nil
	}
	if err != nil {
		return model.Snapshot{}, err
	}
	l.mu.Lock()
	l.absent = time.Time{}
	l.mu.Unlock()
	snap := modelOf(s)
	snap.Latency = time.Since(start)
	return snap, nil
}

// modelOf turns a lease listing into model locks of kind lease: per
// resource its holders, then its waiters in queue order, each waiter
// blocked by the holders whose mode conflicts with its own.
func modelOf(s *lease.Snapshot) model.Snapshot {
	out := model.Snapshot{Taken: s.Now, Locks: make([]model.Lock, 0, len(s.Locks))}
	var holders []*lease.Info // of the current resource
	for i := range s.Locks {
		in := &s.Locks[i]
		name := in.Resource.String()
		if len(holders) > 0 && holders[0].Resource != in.Resource {
			holders = holders[:0]
		}
		l := model.Lock{
			Kind: model.KindLease, Name: name, Namespace: registry.NameOf(registry.LeaseLevel, name),
			Owner: in.Owner, Mode: in.Mode.String(), Granted: in.Granted, Fence: in.Fence,
			Expires: in.LeaseExpires, Heartbeat: in.Heartbeat, Stale: in.Stale, QueuePos: in.Position,
		}
		if in.Granted {
			l.HeldSince = in.Since
			holders = append(holders, in)
		} else {
			l.WaitStart = in.Since
			for _, h := range holders {
				if h.Resource == in.Resource && conflicts(h.Mode, in.Mode) {
					l.BlockedByOwners = append(l.BlockedByOwners, h.Owner)
				}
			}
		}
		out.Locks = append(out.Locks, l)
	}
	for _, a := range s.Audit {
		out.Audit = append(out.Audit, model.Audit{
			Name: a.Resource.String(), Actor: a.Actor, Reason: a.Reason, VictimOwner: a.VictimOwner,
			VictimMode: a.VictimMode.String(), VictimFence: a.VictimFence, Fence: a.Fence, At: a.At,
		})
	}
	return out
}

// conflicts reports whether a holder in mode held keeps a waiter for
// mode want out: readers share with readers and with one upgradeable
// holder; everything else excludes.
func conflicts(held, want lease.Mode) bool {
	switch {
	case held == lease.Read && (want == lease.Read || want == lease.Upgradeable):
		return false
	case held == lease.Upgradeable && want == lease.Read:
		return false
	}
	return true
}

var _ source.Source = (*Source)(nil)
