package lockcore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/locktop/locktop/model"
)

// Querier is what Inspect reads with: a *pgx.Conn, a *pgxpool.Pool, a
// *pgxpool.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// InspectSQL is the one statement Inspect sends. The outer row always exists,
// so an empty lock table still reports the server's clock and connection
// count. Only advisory rows are read; the join to pg_stat_activity names the
// backend of each.
const InspectSQL = `SELECT s.now, s.conns,
	l.pid, d.datname, a.usename, a.application_name, host(a.client_addr), a.state, a.query, a.query_start,
	l.classid, l.objid, l.objsubid, l.mode, l.granted, l.waitstart
FROM (SELECT now() AS now, (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS conns) s
LEFT JOIN pg_locks l ON l.locktype = 'advisory'
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
LEFT JOIN pg_database d ON d.oid = l.database`

// Inspect reads every advisory lock on the server, holders and waiters, in
// one statement, and decodes the keys with the registry. Snapshot.Locks are
// grouped by key (in database, namespace, id order), holders first, then
// waiters in queue order; each waiter's BlockedBy names the holders of its
// key in a conflicting mode (or, for a share waiter queued behind an
// exclusive waiter, that waiter). Held times are left zero: the server does not
// record when an advisory lock was granted (a poller that watches over time
// fills them in).
func Inspect(ctx context.Context, q Querier) (model.Snapshot, error) {
	rows, err := q.Query(ctx, InspectSQL)
	if err != nil {
		return model.Snapshot{}, err
	}
	defer rows.Close()
	var (
		snap                              model.Snapshot
		now                               time.Time
		conns                             int64
		pid                               pgtype.Int4
		db, user, app, addr, state, query pgtype.Text
		qstart, wstart                    pgtype.Timestamptz
		classid, objid                    pgtype.Uint32
		objsubid                          pgtype.Int2
		mode                              pgtype.Text
		granted                           pgtype.Bool
	)
	for rows.Next() {
		if err := rows.Scan(&now, &conns, &pid, &db, &user, &app, &addr, &state, &query, &qstart,
			&classid, &objid, &objsubid, &mode, &granted, &wstart); err != nil {
			return model.Snapshot{}, err
		}
		if !pid.Valid && !classid.Valid {
			continue // the outer row alone: no advisory locks
		}
		key, ok := keyFromLockRow(classid.Uint32, objid.Uint32, objsubid.Int16)
		if !ok {
			continue
		}
		l := model.Lock{
			Kind:            model.KindAdvisory,
			PID:             pid.Int32, // 0 for a prepared transaction's lock
			Database:        db.String,
			User:            user.String,
			ApplicationName: app.String,
			ClientAddr:      addr.String,
			State:           state.String,
			Query:           query.String,
			Mode:            mode.String,
			Granted:         granted.Bool,
			Namespace:       key.Namespace(),
			EntityID:        key.EntityID(),
			Pair:            key.pair,
		}
		if qstart.Valid {
			l.QueryStart = qstart.Time
		}
		if !l.Granted {
			// waitstart is null for a moment after a wait begins.
			l.WaitStart = now
			if wstart.Valid {
				l.WaitStart = wstart.Time
			}
			l.Waited = max(now.Sub(l.WaitStart), 0)
		}
		snap.Locks = append(snap.Locks, l)
	}
	if err := rows.Err(); err != nil {
		return model.Snapshot{}, err
	}
	snap.Taken = now
	snap.Connections = int(conns)
	Arrange(snap.Locks)
	return snap, nil
}

// Arrange sorts locks by key, holders first and waiters in queue order, and
// fills in each row's QueuePos and BlockedBy from the rows themselves. It
// does not copy pg_blocking_pids(), which names every earlier waiter too and
// turns a queue of 20 into a 20-level staircase.
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
				if group[h].Granted && conflicts(group[h].Mode, group[w].Mode) {
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
