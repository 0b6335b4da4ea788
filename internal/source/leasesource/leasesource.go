package leasesource

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/leasedb"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/model"
)

// Source is a source of lease locks (lockcore/lease): every holder and
// waiter with mode, lease left, heartbeat, stale flag and fence, and the
// newest audit records, read through internal/leasedb (lease's own
// listing statements), timed by the database's clock. It is safe for
// concurrent use.
type Source struct {
	name    string
	inspect func(ctx context.Context) (*leasedb.Listing, error)
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
// q is a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx. The read is one
// pipelined batch, creating and locking nothing.
func Postgres(name string, q leasedb.Querier, schema string, optional bool) *Source {
	if schema == "" {
		schema = lease.DefaultSchema
	}
	return &Source{name: name, optional: optional, inspect: func(ctx context.Context) (*leasedb.Listing, error) {
		return leasedb.ReadPostgres(ctx, q, schema)
	}}
}

// SQLite is the lease tables of the SQLite file at path, read-only: a
// poll creates no file and no table (a missing file, or one without the
// tables, fails with an error wrapping ErrNoSchema) and takes no write
// lock.
func SQLite(name, path string) *Source {
	return &Source{name: name, inspect: func(ctx context.Context) (*leasedb.Listing, error) {
		return leasedb.ReadSQLiteFile(ctx, path)
	}}
}

// ErrNoSchema means the database or file has no lease tables: nothing
// has used lease locks there yet.
var ErrNoSchema = leasedb.ErrNoSchema

// Name names the source: "lease", "lease-sqlite", …
func (l *Source) Name() string { return l.name }

// Present reports whether there are lease tables to watch: always for a
// source that was asked for; for the watched database's own (optional)
// tables, whether that database has the schema, which it asks once now.
func (l *Source) Present(ctx context.Context) bool {
	if !l.optional {
		return true
	}
	_, _ = l.Poll(ctx) // an error other than a missing schema shows in the polls to come
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.absent.IsZero()
}

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
	if l.optional && errors.Is(err, ErrNoSchema) {
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
	s.Recycle() // the snapshot keeps only its strings
	snap.Latency = time.Since(start)
	return snap, nil
}

// modelOf turns a lease listing into model locks of kind lease: per
// resource its holders, then its waiters in queue order, each waiter
// blocked by the holders whose mode conflicts with its own.
func modelOf(s *leasedb.Listing) model.Snapshot {
	// Filled in place, field by field: a model.Lock is 560 bytes, mostly
	// zero here, and copying whole ones into a slice of thousands cost
	// more than setting the dozen fields a lease has.
	out := model.Snapshot{Taken: s.Now, Locks: make([]model.Lock, len(s.Entries))}
	first := 0 // the current resource's first entry: its holders come first
	for i := range s.Entries {
		in := &s.Entries[i]
		if i > 0 && s.Entries[i-1].LockID != in.LockID {
			first = i
		}
		l := &out.Locks[i]
		l.Kind, l.Name, l.Namespace = model.KindLease, in.LockID, in.Level
		l.Owner, l.Mode, l.Granted, l.Fence = in.Owner, in.Mode, in.Granted, in.Fence
		l.Expires, l.Heartbeat, l.Stale, l.QueuePos = in.LeaseExpires, in.Heartbeat, in.Stale, in.Position
		if in.Granted {
			l.HeldSince = in.Since
			continue
		}
		l.WaitStart = in.Since
		for _, h := range s.Entries[first:i] {
			if h.Granted && conflicts(h.Mode, in.Mode) {
				l.BlockedByOwners = append(l.BlockedByOwners, h.Owner)
			}
		}
	}
	for _, a := range s.Audit {
		out.Audit = append(out.Audit, model.Audit{
			Name: a.LockID, Actor: a.Actor, Reason: a.Reason, VictimOwner: a.VictimOwner,
			VictimMode: a.VictimMode, VictimFence: a.VictimFence, Fence: a.Fence, At: a.At,
		})
	}
	return out
}

// The stored names of the modes that share (lease's Mode.String).
var read, upgradeable = lease.Read.String(), lease.Upgradeable.String()

// conflicts reports whether a holder in mode held keeps a waiter for
// mode want out: readers share with readers and with one upgradeable
// holder; everything else excludes.
func conflicts(held, want string) bool {
	switch {
	case held == read && (want == read || want == upgradeable):
		return false
	case held == upgradeable && want == read:
		return false
	}
	return true
}

var _ source.Source = (*Source)(nil)
