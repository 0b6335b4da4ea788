package lockcore

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// Querier is what Inspect reads with: a *pgx.Conn, a *pgxpool.Pool, a
// *pgxpool.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// InspectSQL is the one statement Inspect sends. pg_locks is read once
// (the materialized CTE) and comes back as compact rows; the backends and
// databases those rows name come back once each, not once per lock, so a
// backend holding 10,000 locks sends its query text once. The first row
// always exists and carries the server's clock and connection count.
//
// Row kinds: 0 header (now, client connections counted from
// pg_stat_database, which every role may read in full); 1 lock (pid, database oid,
// classid, objid, objsubid, share mode, granted, waitstart: advisory locks
// are ExclusiveLock or ShareLock, so the mode travels as a bool); 2 backend (pid,
// user, application, client address, state, query, query_start,
// state_change); 3 database (oid, name).
const InspectSQL = `WITH l AS MATERIALIZED (
	SELECT pid, database, classid, objid, objsubid, mode, granted, waitstart
	FROM pg_locks WHERE locktype = 'advisory')
SELECT 0 AS kind, NULL::int4 AS pid, NULL::oid AS oid, NULL::oid AS classid, NULL::oid AS objid, NULL::int2 AS objsubid,
	NULL::bool AS share, NULL::bool AS granted, now() AS ts, NULL::timestamptz AS ts2,
	(SELECT sum(numbackends) FROM pg_stat_database)::text AS t1,
	NULL::text AS t2, NULL::text AS t3, NULL::text AS t4, NULL::text AS t5
UNION ALL
SELECT 1, pid, database, classid, objid, objsubid, mode = 'ShareLock', granted, waitstart, NULL, NULL, NULL, NULL, NULL, NULL FROM l
UNION ALL
SELECT 2, a.pid, NULL, NULL, NULL, NULL, NULL, NULL, a.query_start, a.state_change,
	a.usename::text, a.application_name, host(a.client_addr), a.state, a.query
FROM pg_stat_activity a WHERE a.pid IN (SELECT pid FROM l)
UNION ALL
SELECT 3, NULL, d.oid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, d.datname::text, NULL, NULL, NULL, NULL
FROM pg_database d WHERE d.oid IN (SELECT database FROM l)`

// idle reports whether a backend state means no statement is running.
func idle(state string) bool {
	return state == "idle" || state == "idle in transaction" || state == "idle in transaction (aborted)"
}

// Inspect reads every advisory lock on the server, holders and waiters, in
// one statement, and decodes the keys with the registry. Snapshot.Locks are
// grouped by key (in database and key order), holders first, then waiters
// in queue order; each waiter's BlockedBy names the holders of its key in a
// conflicting mode (or, for a share waiter queued behind an exclusive
// waiter, that waiter). The server does not record when an advisory lock
// was granted, so held times are lower bounds: for a holder whose session
// is idle, the time since it went idle; otherwise zero (a poller that
// watches over time does better).
func Inspect(ctx context.Context, q Querier) (model.Snapshot, error) {
	rows, err := q.Query(ctx, InspectSQL)
	if err != nil {
		return model.Snapshot{}, err
	}
	defer rows.Close()

	type lockRow struct {
		pid     int32
		db      uint32
		key     Key
		mode    string
		granted bool
		wait    time.Time
		hasWait bool
	}
	type backend struct {
		user, app, addr, state, query string
		start, changed                time.Time
	}
	var (
		snap     model.Snapshot
		locks    []lockRow
		backends = map[int32]*backend{}
		dbs      = map[uint32]string{}

		kind                int32
		pid                 pgtype.Int4
		oid, classid, objid pgtype.Uint32
		objsubid            pgtype.Int2
		share               pgtype.Bool
		granted             pgtype.Bool
		ts, ts2             pgtype.Timestamptz
		t1, t2, t3, t4, t5  pgtype.Text
	)
	// One destination slice for every row: a fresh variadic slice per Scan
	// would be an allocation per lock.
	dest := []any{&kind, &pid, &oid, &classid, &objid, &objsubid, &share, &granted, &ts, &ts2, &t1, &t2, &t3, &t4, &t5}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return model.Snapshot{}, err
		}
		switch kind {
		case 0:
			snap.Taken = ts.Time
			n, _ := strconv.Atoi(t1.String)
			snap.Connections = n
		case 1:
			key, ok := keyFromLockRow(classid.Uint32, objid.Uint32, objsubid.Int16)
			if !ok {
				continue
			}
			mode := model.ModeExclusive
			if share.Bool {
				mode = model.ModeShare
			}
			locks = append(locks, lockRow{
				pid: pid.Int32, db: oid.Uint32, key: key, mode: mode, granted: granted.Bool,
				wait: ts.Time, hasWait: ts.Valid,
			})
		case 2:
			b := &backend{user: t1.String, app: t2.String, addr: t3.String, state: t4.String, query: t5.String}
			if ts.Valid {
				b.start = ts.Time
			}
			if ts2.Valid {
				b.changed = ts2.Time
			}
			backends[pid.Int32] = b
		case 3:
			dbs[oid.Uint32] = t1.String
		}
	}
	if err := rows.Err(); err != nil {
		return model.Snapshot{}, err
	}
	if snap.Taken.IsZero() {
		snap.Taken = time.Now()
	}

	// Sort compact rows (database, key shape, key, holders first, wait
	// start, pid), then build the model rows once, in order.
	for i := range locks {
		r := &locks[i]
		if !r.granted && !r.hasWait { // waitstart is null for a moment after a wait begins
			r.wait = snap.Taken
		}
	}
	slices.SortFunc(locks, func(a, b lockRow) int {
		if a.db != b.db {
			return cmp.Compare(a.db, b.db)
		}
		if a.key.pair != b.key.pair {
			return compareBool(!a.key.pair, !b.key.pair) // pairs first
		}
		if c := cmp.Compare(a.key.Int64(), b.key.Int64()); c != 0 {
			return c
		}
		if a.granted != b.granted {
			return compareBool(!a.granted, !b.granted) // holders first
		}
		if c := a.wait.Compare(b.wait); c != 0 && !a.granted {
			return c
		}
		return cmp.Compare(a.pid, b.pid)
	})
	snap.Locks = make([]model.Lock, len(locks))
	names := map[int32]string{} // spaces, named once per poll
	var none backend
	for i := range locks {
		r := &locks[i]
		b := backends[r.pid]
		if b == nil {
			b = &none // a prepared transaction's lock, or a backend that just ended
		}
		var ns string
		if r.key.pair {
			// Unregistered spaces are formatted once per poll, not per row.
			var ok bool
			if ns, ok = names[r.key.hi]; !ok {
				ns = registry.AdvisoryNamespace(true, r.key.hi, 0)
				names[r.key.hi] = ns
			}
		} else {
			ns = registry.AdvisoryNamespace(false, 0, r.key.Int64())
		}
		l := &snap.Locks[i]
		*l = model.Lock{
			Kind: model.KindAdvisory, PID: r.pid, Database: dbs[r.db],
			User: b.user, ApplicationName: b.app, ClientAddr: b.addr, State: b.state, Query: b.query, QueryStart: b.start,
			StateChange: b.changed,
			Mode:        r.mode, Granted: r.granted, Namespace: ns, EntityID: r.key.EntityID(), Pair: r.key.pair,
		}
		if !r.granted {
			l.WaitStart = r.wait
			l.Waited = max(snap.Taken.Sub(r.wait), 0)
		} else if idle(b.state) && !b.changed.IsZero() {
			// The session is idle, so whatever took the lock has finished:
			// it has been held at least since the session went idle.
			l.HeldSince = b.changed
			l.Held = max(snap.Taken.Sub(b.changed), 0)
		}
	}
	queue(snap.Locks)
	return snap, nil
}

// Arrange sorts locks by key, holders first and waiters in queue order, and
// fills in each row's QueuePos and BlockedBy from the rows themselves. It
// does not copy pg_blocking_pids(), which names every earlier waiter too and
// turns a queue of 20 into a 20-level staircase. Inspect's rows are already
// arranged; Arrange is for rows from elsewhere (tests, merged sources).
func Arrange(locks []model.Lock) {
	slices.SortFunc(locks, func(a, b model.Lock) int {
		return cmp.Or(
			cmp.Compare(a.Database, b.Database),
			compareBool(!a.Pair, !b.Pair),
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.EntityID, b.EntityID),
			compareBool(!a.Granted, !b.Granted),
			a.WaitStart.Compare(b.WaitStart),
			cmp.Compare(a.PID, b.PID),
		)
	})
	queue(locks)
}

// queue fills in QueuePos and BlockedBy for rows already sorted by key,
// holders first, waiters by wait start.
func queue(locks []model.Lock) {
	for i := 0; i < len(locks); {
		j := i + 1
		for j < len(locks) && sameKey(&locks[i], &locks[j]) {
			j++
		}
		group := locks[i:j]
		pos := 0
		for w := range group {
			if group[w].Granted {
				group[w].QueuePos = 0
				group[w].BlockedBy = nil
				continue
			}
			pos++
			group[w].QueuePos = pos
			group[w].BlockedBy = group[w].BlockedBy[:0]
			for h := range group {
				if !group[h].Granted {
					break // holders come first
				}
				if conflicts(group[h].Mode, group[w].Mode) {
					group[w].BlockedBy = append(group[w].BlockedBy, group[h].PID)
				}
			}
			if len(group[w].BlockedBy) == 0 {
				// A share waiter behind an exclusive waiter waits for that
				// waiter, not for the share holders: name the nearest one.
				for e := w - 1; e >= 0 && !group[e].Granted; e-- {
					if conflicts(group[e].Mode, group[w].Mode) {
						group[w].BlockedBy = append(group[w].BlockedBy, group[e].PID)
						break
					}
				}
			}
		}
		i = j
	}
}

func sameKey(a, b *model.Lock) bool {
	return a.EntityID == b.EntityID && a.Pair == b.Pair && a.Namespace == b.Namespace &&
		a.Database == b.Database && a.Kind == b.Kind
}

// conflicts reports whether advisory lock modes conflict: share locks only
// conflict with exclusive ones.
func conflicts(held, want string) bool {
	return held == model.ModeExclusive || want == model.ModeExclusive
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
