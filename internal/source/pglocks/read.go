package pglocks

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// Querier is what Read reads with: a *pgx.Conn, a *pgxpool.Pool, a
// *pgxpool.Conn or a pgx.Tx.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// SQL is the one statement Read sends. It reads pg_locks in
// one pass, with no CTE: materializing pg_locks to read it three times
// (advisory rows, the pids to join sessions on, the rows of other types)
// cost the server half as much again as the bare read (issue 26:
// 1.4–1.6× a bare pg_locks query). What the server used to filter and
// join, Read now does from the rows. Sessions come back once each,
// not once per lock, so a backend holding 10,000 locks sends its query
// text once; every session comes back (a few hundred rows at most, where
// choosing them took a pass over every lock), and Read keeps the ones
// the kept rows name. The first row always exists and carries the
// server's clock.
//
// Row kinds (the first column): 0 header (now in ts, this database's oid);
// null, a row of pg_locks, sent as the view has it — pid, database oid,
// classid, objid, objsubid, granted (in flag), waitstart (ts), locktype
// (t1), mode (t2), virtualxid (t4), relation, page, tuple, transactionid
// (xid) —, which Read tells apart and formats itself: a column computed
// per row in the statement (a CASE on locktype for each column, the mode
// compared with 'ShareLock', the object formatted as text) cost the server
// a third as much again as sending the view's columns, at 10,000 advisory
// locks (issue 26); 2 session (pid, database oid — null for a process
// outside any database, which the connection count leaves out, as
// pg_stat_database's numbackends does —, user, application, client
// address, state, query, query_start, state_change, xact_start, and in flag
// whether it is a client backend (a backend whose type the role may not
// see counts as one): Table.Alive is read from these rows, not from a
// second read of pg_stat_activity in the header, which cost the server a
// twentieth of the statement); 3 database (oid, name: every database, fewer
// rows than the hashing that picks them would cost); 5 the sessions
// terminated so far (in t3), last: the server reads it after the sessions
// (a UNION ALL runs its branches in order, and the sum is taken when its
// row is), so a backend missing from them is counted already. Read keeps
// the rows of other types than advisory that matter (see waitedFor). Such
// a row's relation is named in the statement (t3) only for a waiter or a
// tuple lock (the rows that can name an object nobody else names), of this
// database or a shared catalog: a lookup per granted relation lock would
// cost the server more than the rest of the statement on a busy server;
// Read copies the name to the granted rows on the same relation. The test
// of an advisory row's null relation comes first, so it costs the 10,000
// advisory rows of a busy server nothing else. The
// name is pg_identify_object's identity (schema.table, quoted as
// format('%I.%I') quotes), read from the catalog caches: a join of
// pg_class and pg_namespace per row cost the server three to four times as
// much (1,000 advisory locks and 100 row-lock waits: 0.32× against 0.09×
// of the bare read).
//
// Fast-path rows are left out: only weak relation locks and a session's own
// virtual xid are taken on the fast path, and a request that conflicts with
// one moves it to the shared table first, so a fast-path row never blocks
// anyone. Who blocks a waiter is worked out by Read from these rows
// (see BlockedBy), not by pg_blocking_pids(), which costs the server a
// pass over the lock table per waiter.
const SQL = `SELECT 0 AS kind, NULL::int4 AS pid, (SELECT oid FROM pg_database WHERE datname = current_database()) AS oid,
	NULL::oid AS classid, NULL::oid AS objid, NULL::int2 AS objsubid, NULL::bool AS flag,
	now() AS ts, NULL::timestamptz AS ts2, NULL::timestamptz AS ts3,
	NULL::text AS t1, NULL::text AS t2, NULL::text AS t3, NULL::text AS t4, NULL::text AS t5,
	NULL::oid AS relation, NULL::int4 AS page, NULL::int2 AS tuple, NULL::xid AS xid
UNION ALL
SELECT NULL, pid, database, classid, objid, objsubid, granted, waitstart, NULL, NULL, locktype, mode,
	CASE WHEN relation IS NOT NULL AND (NOT granted OR locktype = 'tuple')
		AND database IN (0, (SELECT oid FROM pg_database WHERE datname = current_database())) THEN
		(pg_identify_object('pg_class'::regclass, relation, 0)).identity END,
	virtualxid, NULL, relation, page, tuple, transactionid
FROM pg_locks WHERE NOT fastpath
UNION ALL
SELECT 2, a.pid, a.datid, NULL, NULL, NULL, coalesce(a.backend_type, 'client backend') = 'client backend',
	a.query_start, a.state_change, a.xact_start,
	a.usename::text, a.application_name, host(a.client_addr), a.state, a.query, NULL, NULL, NULL, NULL
FROM pg_stat_activity a
UNION ALL
SELECT 3, NULL, d.oid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, d.datname::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM pg_database d
UNION ALL
SELECT 5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
	(SELECT sum(sessions_killed) FROM pg_stat_database)::text, NULL, NULL, NULL, NULL, NULL, NULL`

// Table is every advisory lock on a server at one instant, as Read
// reads it.
type Table struct {
	Taken       time.Time // the server's clock
	Connections int       // client backends on the server
	// Rows are in database and key order (two-int keys first), holders
	// first, then waiters by wait start, then by pid.
	Rows []Row
	// Others are the heavyweight locks of other types that someone waits
	// for: the waiters, the granted rows on what they wait for, and the
	// tuple locks the waiters hold; in the server's order.
	Others []Other
	// Backends are the sessions the rows name, by pid.
	Backends map[int32]*Backend
	// Alive are the pids of every client backend on the server, so that a
	// reader can tell a session that let go of its locks from one that
	// ended (a backend whose type the role may not see counts as one).
	Alive []int32
	// Killed is the number of sessions terminated on the server since its
	// statistics were reset (pg_stat_database.sessions_killed, summed):
	// by pg_terminate_backend or a fast shutdown. Read after Alive.
	Killed int64
}

// Other is one row of pg_locks of a type other than advisory, as
// Read reads it.
type Other struct {
	LockType string // pg_locks.locktype: "tuple", "transactionid", "relation", …
	Database string // the database's name; "" for a lock outside any (a transaction id)
	// Relation is the relation's schema-qualified name; "" when the lock
	// has none, or the relation is in another database (its name cannot be
	// read from here: RelationOID says which, for a reader that can).
	Relation string
	// DatabaseOID and RelationOID are pg_locks.database and .relation (0
	// when null): a relation's identity, named or not.
	DatabaseOID, RelationOID uint32
	Tuple                    string // "(page,tuple)" of a tuple lock
	Object                   string // what else identifies it: a transaction id, a virtual xid, a page
	PID                      int32
	Mode                     string // as pg_locks spells it
	Granted                  bool
	// WaitStart is when a waiter started waiting (or Taken while the
	// server has not recorded it yet); zero for a granted row.
	WaitStart time.Time
	// BlockedBy is who a waiter waits for, as pg_blocking_pids() names
	// them but worked out from the rows (see blockers): the holders of the
	// same object in a conflicting mode, then the waiters queued before it
	// (by wait start) that want a conflicting mode. nil for a granted row.
	BlockedBy []int32
	Backend   *Backend
}

// Row is one holder or waiter of one advisory lock.
type Row struct {
	Key      lockcore.Key
	Database string // the database's name ("" if it could not be read)
	PID      int32
	Share    bool // a ShareLock (pg_advisory_lock_shared); else ExclusiveLock
	Granted  bool
	// WaitStart is when a waiter started waiting (pg_locks.waitstart, or
	// Taken while the server has not recorded it yet); zero for holders.
	WaitStart time.Time
	// Backend is the session that holds or waits; the zero Backend when the
	// server did not show it (a prepared transaction, a backend that just
	// ended). Rows of one backend share one value.
	Backend *Backend
}

// Backend is what pg_stat_activity shows of a session. A role without
// pg_monitor sees other roles' State, Query and times as empty.
type Backend struct {
	User, Application, ClientAddr string
	State                         string // pg_stat_activity.state: "active", "idle", ...
	Query                         string // the current or last statement
	QueryStart, StateChange       time.Time
	// XactStart is when the session's current transaction began
	// (pg_stat_activity.xact_start); zero outside a transaction. A lock
	// the transaction took is held at most since then.
	XactStart time.Time
}

// lockRow is an advisory row of SQL before it is sorted. It holds no
// pointer (the wait start is a number), so sorting 10,000 of them moves
// plain memory, with no write barriers.
type lockRow struct {
	// hi and lo are the row's place in the order before its holders and
	// waiters are told apart (see pack): two numbers to compare, not five
	// fields, for most of a sort's comparisons.
	hi, lo  uint64
	pid     int32
	db      uint32
	key     lockcore.Key
	share   bool
	granted bool
	hasWait bool
	wait    int64 // UnixNano
}

// pack sets r's sort keys: hi, the database and whether the key is a
// single bigint (two-int keys first); lo, the key as a bigint with its sign
// bit flipped, so that unsigned order is signed order.
func (r *lockRow) pack() {
	r.hi = uint64(r.db) << 1
	if !r.key.IsPair() {
		r.hi |= 1
	}
	r.lo = uint64(r.key.Int64()) ^ 1<<63
}

// Read reads every advisory lock on the server, holders and waiters,
// with the sessions behind them, in one statement (SQL), and decodes
// the keys.
func Read(ctx context.Context, q Querier) (Table, error) {
	var r Reader
	return r.Read(ctx, q)
}

// Reader is Read for a caller that polls: it keeps the last read's advisory
// rows, in the server's order and sorted. A server whose advisory locks did
// not change since sends the same rows in the same order (its lock table's),
// so their sorted order is reused instead of sorting 10,000 rows again
// (issue 26: the sort was half of Read's CPU at 10,000 locks). The zero
// Reader is ready; it is not safe for concurrent use.
//
// A Table it returns is the caller's until the next Read: its Rows and
// Others share one array each from read to read (at 10,000 locks, 0.7 MB a
// poll not allocated, zeroed and collected again). A session that the
// server shows as it did at the last read keeps its *Backend: a poll of an
// unchanged server allocates no session and none of its text (issue 26:
// at 1,000 locks and 100 waiting sessions, the sessions were a third of a
// poll's allocations). A Backend is never written after Read returns it.
type Reader struct {
	raw      []lockRow          // the last read's advisory rows, in the server's order
	sorted   []lockRow          // the same rows, sorted
	spare    []lockRow          // where the next read decodes its rows: never raw's array
	rows     []Row              // the last read's Table.Rows, reused by the next
	others   []Other            // the last read's Table.Others' array, reused by the next
	objs     []object           // others' objects, reused likewise
	sessions map[int32]*Backend // every session the last read saw, by pid
	texts    texts              // the other lock types' texts, interned
}

// Read is the package's Read, reusing what r kept from its last read.
func (rd *Reader) Read(ctx context.Context, q Querier) (Table, error) {
	rows, err := q.Query(ctx, SQL)
	if err != nil {
		return Table{}, err
	}
	defer rows.Close()

	var (
		t        Table
		locks    = rd.spare[:0]
		backends = make(map[int32]*Backend, len(rd.sessions))
		dbs      = map[uint32]string{}

		others = rd.others[:0]
		objs   = rd.objs[:0] // others' objects, by index
		ownDB  uint32        // this connection's database
		sc     = newScanner(rows)
		w      = &sc.r
	)
	for rows.Next() {
		if err := sc.scan(rows); err != nil {
			return Table{}, err
		}
		switch w.kind {
		case 0:
			t.Taken = w.ts.Time
			ownDB = w.oid.Uint32
		case 1:
			if !w.t1.is("advisory") {
				o := Other{LockType: w.t1.among(lockTypes[:]), Relation: rd.texts.of(w.t3.b), Tuple: tupleOf(w, &rd.texts), PID: w.pid.Int32, Mode: w.t2.among(lockModes[:]), Granted: w.flag.Bool}
				o.Object = objectOf(o.LockType, w, &rd.texts)
				if !o.Granted {
					o.WaitStart = w.ts.Time // zero (fixed below) until the server records it
				}
				others = append(others, o)
				objs = append(objs, object{lockType: o.LockType, database: w.oid.Uint32, relation: w.relation.Uint32, tuple: o.Tuple, object: o.Object})
				continue
			}
			key, ok := keyFromLockRow(w.classid.Uint32, w.objid.Uint32, w.objsubid.Int16)
			if !ok {
				continue
			}
			locks = append(locks, lockRow{
				pid: w.pid.Int32, db: w.oid.Uint32, key: key, share: w.t2.is("ShareLock"), granted: w.flag.Bool,
				wait: w.ts.Time.UnixNano(), hasWait: w.ts.Valid,
			})
			locks[len(locks)-1].pack()
		case 2:
			backends[w.pid.Int32] = sessionOf(w, rd.sessions[w.pid.Int32])
			if w.oid.Valid {
				t.Connections++
				if w.flag.Bool {
					t.Alive = append(t.Alive, w.pid.Int32)
				}
			}
		case 3:
			dbs[w.oid.Uint32] = rd.texts.of(w.t1.b)
		case 5:
			t.Killed, _ = strconv.ParseInt(w.t3.str(), 10, 64)
		}
	}
	if err := rows.Err(); err != nil {
		return Table{}, err
	}
	if t.Taken.IsZero() {
		t.Taken = time.Now()
	}

	// Sort the compact rows, then build the exported rows once, in order.
	locks = rd.sort(locks, t.Taken.UnixNano())
	if cap(rd.rows) < len(locks) {
		rd.rows = make([]Row, len(locks))
	}
	t.Rows, rd.rows = rd.rows[:len(locks)], rd.rows[:0]
	none := &Backend{}
	others, objs = waitedFor(others, objs)
	rd.others, rd.objs = others[:0], objs[:0]
	// The server sent every session: keep those the rows name. The next
	// read compares its sessions with all of them.
	rd.sessions = backends
	backends = namedBackends(backends, locks, others)
	relations := map[uint32]string{} // this database's and the shared ones, named by a waiter
	for i := range others {
		if o := &others[i]; o.Relation != "" {
			relations[objs[i].relation] = o.Relation
		}
	}
	for i := range others {
		o := &others[i]
		o.Database = dbs[objs[i].database]
		o.DatabaseOID, o.RelationOID = objs[i].database, objs[i].relation
		if db := objs[i].database; o.Relation == "" && (db == 0 || db == ownDB) {
			// Another database's relation oid may be one of this database's.
			o.Relation = relations[objs[i].relation]
		}
		if !o.Granted && o.WaitStart.IsZero() {
			o.WaitStart = t.Taken
		}
		if o.Backend = backends[o.PID]; o.Backend == nil {
			o.Backend = none
		}
	}
	blockers(others, objs)
	t.Others, t.Backends = others, backends
	var (
		b      *Backend // the last row's backend and database name: neighbours mostly share them
		db     string
		pid    int32
		dbOID  uint32
		looked bool
	)
	for i := range locks {
		r := &locks[i]
		if !looked || r.pid != pid {
			if b = backends[r.pid]; b == nil {
				b = none
			}
			pid = r.pid
		}
		if !looked || r.db != dbOID {
			db, dbOID = dbs[r.db], r.db
		}
		looked = true
		t.Rows[i] = Row{Key: r.key, Database: db, PID: r.pid, Share: r.share, Granted: r.granted, Backend: b}
		if !r.granted {
			t.Rows[i].WaitStart = time.Unix(0, r.wait)
		}
	}
	return t, nil
}

// sort returns raw's rows sorted (in the order Table.Rows gives), with
// each waiter the server has not yet stamped with a wait start given now.
// It keeps raw for the next call, and reuses the last order when raw holds
// the same rows in the same order as the last call's.
func (rd *Reader) sort(raw []lockRow, now int64) []lockRow {
	same := rd.sorted != nil && slices.Equal(raw, rd.raw)
	rd.raw, rd.spare = raw, rd.raw
	if !same {
		rd.sorted = append(rd.sorted[:0], raw...)
		stamp(rd.sorted, now)
		slices.SortFunc(rd.sorted, compareRows)
		return rd.sorted
	}
	// The rows waiting unstamped get this read's now: the same for all of
	// them and later than any stamped wait, so their places do not move.
	stamp(rd.sorted, now)
	return rd.sorted
}

// stamp gives each waiter without a wait start (pg_locks.waitstart is null
// for a moment after a wait begins) the time now.
func stamp(locks []lockRow, now int64) {
	for i := range locks {
		if r := &locks[i]; !r.granted && !r.hasWait {
			r.wait = now
		}
	}
}

// compareRows orders advisory rows by database and key (two-int keys
// first), holders first, then waiters by wait start, then by pid.
func compareRows(a, b lockRow) int {
	if a.hi != b.hi {
		return cmp.Compare(a.hi, b.hi)
	}
	if a.lo != b.lo {
		return cmp.Compare(a.lo, b.lo)
	}
	if a.granted != b.granted {
		return model.CompareBool(!a.granted, !b.granted) // holders first
	}
	if c := cmp.Compare(a.wait, b.wait); c != 0 && !a.granted {
		return c
	}
	return cmp.Compare(a.pid, b.pid)
}

// namedBackends returns the backends that an advisory row or a kept row
// of another type names.
func namedBackends(backends map[int32]*Backend, locks []lockRow, others []Other) map[int32]*Backend {
	named := make(map[int32]*Backend, len(backends))
	for i := range locks {
		// A backend's rows are mostly neighbours: one lookup for a run of
		// them, not one per lock.
		if i == 0 || locks[i].pid != locks[i-1].pid {
			if b, ok := backends[locks[i].pid]; ok {
				named[locks[i].pid] = b
			}
		}
	}
	for i := range others {
		if b, ok := backends[others[i].PID]; ok {
			named[others[i].PID] = b
		}
	}
	return named
}

// sessionOf is the session of row w (a row of kind 2): last, the same
// backend's session at the last read, when the server shows it unchanged;
// else a new one.
func sessionOf(w *wireRow, last *Backend) *Backend {
	var qs, sc, xs time.Time
	if w.ts.Valid {
		qs = w.ts.Time
	}
	if w.ts2.Valid {
		sc = w.ts2.Time
	}
	if w.ts3.Valid {
		xs = w.ts3.Time
	}
	if last != nil && last.QueryStart.Equal(qs) && last.StateChange.Equal(sc) && last.XactStart.Equal(xs) &&
		w.t1.equal(last.User) && w.t2.equal(last.Application) && w.t3.equal(last.ClientAddr) &&
		w.t4.equal(last.State) && w.t5.equal(last.Query) {
		return last
	}
	return &Backend{User: w.t1.str(), Application: w.t2.str(), ClientAddr: w.t3.str(), State: w.t4.str(), Query: w.t5.str(),
		QueryStart: qs, StateChange: sc, XactStart: xs}
}

// keyFromLockRow decodes pg_locks' classid, objid and objsubid for an advisory
// lock. classid and objid are unsigned oids; a negative int32 shows up as a
// large oid and is turned back into its signed value here.
func keyFromLockRow(classid, objid uint32, objsubid int16) (lockcore.Key, bool) {
	switch objsubid {
	case 1:
		return lockcore.Int64(int64(classid)<<32 | int64(objid)), true
	case 2:
		return lockcore.Pair(int32(classid), int32(objid)), true
	}
	return lockcore.Key{}, false
}
