package model

import (
	"slices"
	"strconv"
	"time"

	"github.com/locktop/locktop/lockcore/registry"
)

// Kind says what sort of lock a Lock row describes. Every kind shares one
// table, so nothing may assume a row has a PostgreSQL pid (Redis and lease
// rows have an Owner instead) or an advisory key.
type Kind string

// Lock kinds. The PostgreSQL kinds but advisory come from pg_locks rows
// that someone waits for, and from the holders that block them.
const (
	// KindAdvisory is pg_advisory_lock and friends, session or transaction
	// scoped (pg_locks does not say which).
	KindAdvisory Kind = "advisory"
	// KindRow is a row lock (SELECT … FOR UPDATE, UPDATE, DELETE): a wait
	// for a tuple lock, or for the transaction that holds the row when the
	// waiter's tuple lock names the row. Relation and Row say which.
	KindRow Kind = "row"
	// KindTransaction is a wait for another transaction to end that names
	// no row (a unique index insert, a waiter whose row is not known).
	KindTransaction Kind = "transactionid"
	// KindRelation is a table or index lock (LOCK TABLE, ALTER TABLE, a
	// query queued behind one). Relation says which.
	KindRelation Kind = "relation"
	// KindOther is any other heavyweight lock type (object, page, extend,
	// virtualxid, …): LockType says which, Object what.
	KindOther Kind = "other"
	// KindRedis is a Redis session mutex (seed 002, lockcore/redislock):
	// Name is the key, Owner the holder, Expires when its TTL runs out.
	KindRedis Kind = "redis"
	// KindLease is a lease lock in a table (seed 004, lockcore/lease), on
	// PostgreSQL or SQLite: Name is the resource ("map:m1").
	KindLease Kind = "lease"
)

// Kinds are every kind, in the order the dashboard and the metrics list
// them.
var Kinds = []Kind{KindAdvisory, KindRow, KindTransaction, KindRelation, KindOther, KindRedis, KindLease}

// PG reports whether locks of kind k live in PostgreSQL's lock table and
// have a backend (a pid).
func (k Kind) PG() bool {
	switch k {
	case KindRedis, KindLease:
		return false
	}
	return true
}

// Advisory lock modes as pg_locks spells them.
const (
	ModeExclusive = "ExclusiveLock"
	ModeShare     = "ShareLock"
)

// Lock is one row of lock state: a holder or a waiter of one key.
//
// Times are absolute, read on the clock of the source the lock came from;
// durations are derived from the snapshot's time (Snapshot.Now), so a lock
// that did not change reads the same from one snapshot to the next (a
// recording stores it once).
type Lock struct {
	Kind Kind
	// Backend that holds or waits (PostgreSQL kinds). Zero for Redis and
	// lease locks.
	PID      int32
	Database string
	// Backend is what pg_stat_activity shows of the session behind the
	// row; nil for Redis and lease locks. The rows of one session in a
	// poll share one value (10,000 locks of 50 sessions carry 50 of them,
	// not 10,000 copies of eight fields: issue 26), so it is never written
	// through a row (OwnBackend gives a row one of its own to write). Read
	// it through Session, which is never nil: its fields are promoted, but
	// l.Query on a row without a Backend is a nil dereference. It is
	// embedded so that a Lock's JSON (a recording's) keeps its fields
	// among the Lock's own, in their old place; a row without one leaves
	// them out.
	*Backend

	// Mode as the source spells it: ExclusiveLock or ShareLock (advisory),
	// any pg_locks mode (other PostgreSQL kinds), "exclusive" (Redis),
	// "read", "write" or "upgradeable" (lease).
	Mode    string
	Granted bool

	// Advisory keys: Namespace is the registry's name ("AGENT") or, for an
	// unregistered two-int key, the space as a decimal string; for a
	// one-bigint key it is the registered name of that fixed id or "".
	// EntityID is the signed id (two-int keys) or the signed 64-bit key
	// (one-bigint keys). For Redis and lease locks Namespace is the
	// registry's name of the pattern the key fits ("SESSION", "MAP"), or "".
	Namespace string
	EntityID  int64
	// Pair reports a two-int key (objsubid 2) rather than one bigint.
	Pair bool

	// Other PostgreSQL kinds: LockType is pg_locks.locktype ("tuple",
	// "transactionid", "relation", "object", …); Relation the relation's
	// schema-qualified name ("" when none, or in another database); Row the
	// tuple id "(page,tuple)" of a row lock; Object what else identifies
	// the locked thing (the transaction id waited for; the fields of an
	// object, page or virtualxid lock).
	LockType string
	Relation string
	Row      string
	Object   string
	// RelationOID is the relation's oid (pg_locks.relation), 0 when the
	// lock has none. A relation of another database whose name is not
	// known (yet) shows as "DATABASE oid N" (see KeyLabel).
	RelationOID uint32

	// Name is the key of a Redis lock (the whole key, prefix included) or
	// the resource of a lease ("map:m1").
	Name string

	// WaitStart is when a waiter started waiting (pg_locks.waitstart; a
	// Redis or lease waiter's registration).
	WaitStart time.Time
	// HeldSince is a time the lock is known to have been held since. For
	// PostgreSQL locks the server does not record grant times, so it is a
	// lower bound, the earliest of: for a holder whose session is idle,
	// when it went idle; for a holder that blocks a waiter in a
	// conflicting mode, when that waiter began waiting (it has held the
	// lock all along); for a poller that watches over time, when it first
	// saw the grant. For a lock other than advisory it is never before
	// XactStart, since a transaction's lock is held at most since the
	// transaction began. Redis and lease holders record their grant. Zero
	// when nothing is known.
	HeldSince time.Time
	// Expires is when a Redis key's TTL runs out, or a lease passes (for a
	// lease waiter: when its registration lapses unless it retries). Zero
	// for PostgreSQL kinds.
	Expires time.Time
	// Heartbeat is a lease holder's last heartbeat (a waiter's last retry).
	Heartbeat time.Time

	// BlockedBy lists the pids of the holders this waiter waits for. For
	// advisory locks it names holders of the same key in a conflicting
	// mode, never earlier waiters (unlike pg_blocking_pids), and never the
	// waiter itself (its own shared hold does not block its upgrade); for other
	// PostgreSQL kinds it is pg_blocking_pids() narrowed to the holders of
	// the same object when there are any.
	BlockedBy []int32
	// BlockedByOwners lists the owners a Redis or lease waiter waits for.
	BlockedByOwners []string
	// QueuePos is a waiter's place in its key's queue, 1 for the first, by
	// WaitStart; 0 for holders.
	QueuePos int

	// Owner is the holder's or waiter's owner id: of every Redis and lease
	// lock, and of a PostgreSQL backend whose application_name carries one
	// (see AppWithOwner); the same id across kinds is the same holder.
	// Redis and lease locks also carry the first characters of the token
	// (never the whole token), the grant's fencing token, and whether a lease
	// is stale (passed, heartbeat older than its grace, no active job:
	// recoverable).
	Owner string
	Token string
	Fence int64
	Stale bool

	// Source is the index in Snapshot.Sources of the source this lock was
	// read from; 0 in a snapshot of one source.
	Source int
	// Server is the name of the target (the watched server) the lock was
	// read from, when locktop watches several (--target NAME=…); "" for
	// the one unnamed target, and then left out of the JSON, so that
	// recordings of one server read and write as before.
	Server string `json:",omitempty"`
}

// Backend is what pg_stat_activity shows of a PostgreSQL session.
type Backend struct {
	User            string
	ApplicationName string
	ClientAddr      string
	State           string    // pg_stat_activity.state
	Query           string    // the backend's current or last statement
	QueryStart      time.Time // zero when unknown
	StateChange     time.Time // when State last changed; zero when unknown
	// XactStart is when the backend's current transaction began
	// (pg_stat_activity.xact_start); zero outside a transaction or when
	// unknown. A lock the transaction took is held at most since then (a
	// session-level advisory lock can be older).
	XactStart time.Time
}

// noBackend is the Session of a row without a Backend.
var noBackend Backend

// Session returns the row's Backend, or an empty one for a row without
// (a Redis or lease lock): never nil, and never to be written (it is shared).
func (l *Lock) Session() *Backend {
	if l.Backend == nil {
		return &noBackend
	}
	return l.Backend
}

// OwnBackend gives l a Backend of its own, a copy of the one it has (which
// other rows may share) or a new one, and returns it, to write.
func (l *Lock) OwnBackend() *Backend {
	b := *l.Session()
	l.Backend = &b
	return l.Backend
}

// KeyID identifies a lock key across rows: two rows with equal KeyIDs are
// the same lock in the same database (or the same Redis key, the same lease
// resource).
type KeyID struct {
	Kind      Kind
	Database  string
	Pair      bool
	Namespace string
	EntityID  int64
	// A relation is identified by its oid where the row has one (Relation
	// is then ""), so a key keeps its identity when its name comes in
	// later; by its name otherwise (a recording made before oids).
	Relation    string
	RelationOID uint32
	Row         string
	Object      string
	Name        string
	// Server keeps the same key on two watched servers apart.
	Server string
}

// KeyHint is the part of a KeyID that tells most keys apart: the advisory
// key's id, the relation and row, the Redis key's or lease's name. Rows of
// one key have equal hints; rows of different keys mostly do not. It hashes
// and compares much faster than a KeyID (seven strings), so an index of
// many rows can be keyed by it and check the KeyID only on a match.
type KeyHint struct {
	EntityID    int64
	RelationOID uint32
	Name        string
	Row         string
}

// KeyHint returns the hint of the key this row is about.
func (l *Lock) KeyHint() KeyHint {
	return KeyHint{l.EntityID, l.RelationOID, l.Name, l.Row}
}

// KeyID returns the identity of the key this row is about.
func (l *Lock) KeyID() KeyID {
	id := KeyID{Kind: l.Kind, Database: l.Database, Pair: l.Pair, Namespace: l.Namespace, EntityID: l.EntityID,
		Relation: l.Relation, RelationOID: l.RelationOID, Row: l.Row, Object: l.Object, Name: l.Name, Server: l.Server}
	if l.RelationOID != 0 {
		id.Relation = ""
	}
	return id
}

// SameKey reports whether l and o are rows of the same key: l.KeyID() ==
// o.KeyID(), without building the two KeyIDs (eleven fields each), which
// was a good part of a refresh at 10,000 locks. The fields that differ
// most often are compared first.
func (l *Lock) SameKey(o *Lock) bool {
	if l.EntityID != o.EntityID || l.RelationOID != o.RelationOID || l.Kind != o.Kind || l.Pair != o.Pair ||
		l.Name != o.Name || l.Row != o.Row || l.Namespace != o.Namespace || l.Database != o.Database ||
		l.Object != o.Object || l.Server != o.Server {
		return false
	}
	return l.RelationOID != 0 || l.Relation == o.Relation
}

// RelationLabel names the row's relation: its schema-qualified name, else
// "DATABASE oid N" for a relation whose name is not known (another
// database that could not be read), else "".
func (l *Lock) RelationLabel() string {
	if l.Relation != "" || l.RelationOID == 0 {
		return l.Relation
	}
	oid := "oid " + strconv.FormatUint(uint64(l.RelationOID), 10)
	if l.Database == "" {
		return oid
	}
	return l.Database + " " + oid
}

// KeyLabel renders the key for people, through the registry's formatters:
// "AGENT 7", "IDEMPOTENCY_CLEANUP", "5 -3" for an unregistered pair, the
// bare number of a one-bigint key; "public.turns row (0,3)", "public.turns",
// "db2 oid 16390" (a relation not named, see RelationLabel),
// "transaction 1234"; a Redis key or a lease resource as it is named.
func (l *Lock) KeyLabel() string {
	switch l.Kind {
	case KindRow:
		return registry.RowLabel(l.RelationLabel(), l.Row)
	case KindRelation:
		return registry.RowLabel(l.RelationLabel(), "")
	case KindTransaction:
		return registry.TransactionLabel(l.Object)
	case KindOther:
		if rel := l.RelationLabel(); rel != "" {
			return l.LockType + " " + rel + " " + l.Object
		}
		return l.LockType + " " + l.Object
	case KindRedis, KindLease:
		return registry.NamedLabel(l.Name)
	}
	return registry.AdvisoryLabel(l.Namespace, l.EntityID, l.Pair)
}

// Holder names the row's session: its pid, or a Redis or lease owner. On
// a waiting row that is the waiter, which holds nothing: the holders it
// waits for are BlockedBy (BlockedByOwners). (Label it "pid", not
// "holder", where rows of both kinds are shown.)
func (l *Lock) Holder() string {
	if l.PID != 0 {
		return strconv.Itoa(int(l.PID))
	}
	return l.Owner
}

// Waited is how long a waiter has waited at now (its snapshot's
// Snapshot.Now); zero for a holder.
func (l *Lock) Waited(now time.Time) time.Duration {
	if l.Granted || l.WaitStart.IsZero() {
		return 0
	}
	return max(now.Sub(l.WaitStart), 0)
}

// Held is how long a holder is known to have held the lock at now; zero
// for a waiter or when nothing is known (HeldSince is zero).
func (l *Lock) Held(now time.Time) time.Duration {
	if !l.Granted || l.HeldSince.IsZero() {
		return 0
	}
	return max(now.Sub(l.HeldSince), 0)
}

// Left is the TTL or lease a Redis or lease lock has left at now: negative
// once it has passed (a stale lease); zero when Expires is not set.
func (l *Lock) Left(now time.Time) time.Duration {
	if l.Expires.IsZero() {
		return 0
	}
	return l.Expires.Sub(now)
}

// HeartbeatAge is the time since a lease holder's last heartbeat at now;
// zero when none is recorded.
func (l *Lock) HeartbeatAge(now time.Time) time.Duration {
	if l.Heartbeat.IsZero() {
		return 0
	}
	return max(now.Sub(l.Heartbeat), 0)
}

// Blockers names whom a waiter waits for, pids and owners together, for
// display.
func (l *Lock) Blockers() []string {
	out := make([]string, 0, len(l.BlockedBy)+len(l.BlockedByOwners))
	for _, p := range l.BlockedBy {
		out = append(out, strconv.Itoa(int(p)))
	}
	return append(out, l.BlockedByOwners...)
}

// Audit is one audited recovery of a lease (seed 004 §3.3): who took over
// or freed which resource, when and why, from which holder.
type Audit struct {
	Name        string // the resource, as Lock.Name
	Actor       string
	Reason      string
	VictimOwner string
	VictimMode  string
	VictimFence int64
	Fence       int64 // the taker's new fence; 0 for a plain recovery
	At          time.Time
	// Source is the index in Sources of the source the record came from,
	// in a merged snapshot (as Lock.Source): which target's trail it is.
	Source int
	// Server is the name of the target whose source keeps the trail (as
	// Lock.Server); "" for the one unnamed target.
	Server string
}

// Snapshot is the lock state at one instant.
type Snapshot struct {
	// Taken is the server's clock when the snapshot was read (for a merged
	// snapshot, the first source's that answered).
	Taken time.Time
	// Locks are ordered by key, then holders before waiters, then by queue
	// position (a merged snapshot: each source's locks in turn).
	Locks []Lock
	// Connections is the number of client backends on the server.
	Connections int
	// Latency is how long the poll took, round trip and decoding.
	Latency time.Duration
	// Interval is the time since the previous poll's Taken (0 for the first).
	Interval time.Duration
	// NewWaits counts waits that began since the previous poll.
	NewWaits int
	// Audit holds recent lease recoveries, newest first (lease sources).
	Audit []Audit
	// Sources describes each source of a merged snapshot (Merge); empty
	// for the snapshot of one source. Lock.Source indexes it.
	Sources []SourceStatus
	// Partial names the parts of the source that did not answer, one line
	// each ("127.0.0.1:7002: connection refused": a Redis Cluster's node);
	// Locks are the other parts'.
	Partial []string
	// Truncated says a bound cut the listing: there are more locks than
	// Locks.
	Truncated bool
	// Ended are the sessions that held or waited on a lock in the source's
	// previous snapshot and have ended since (PostgreSQL sources).
	Ended []SessionEnd `json:",omitempty"`
}

// SourceStatus is how one source answered for a merged snapshot.
type SourceStatus struct {
	Name    string        // "postgres", "redis", "lease", …
	Taken   time.Time     // the source's clock when it was read; zero if it failed
	Latency time.Duration // how long its poll took
	Locks   int           // rows it contributed
	// Err is why the source has no locks in this snapshot: one line, no
	// password; "" when it answered.
	Err string
	// Partial and Truncated are the source's snapshot's.
	Partial   []string
	Truncated bool
	// Connections is the source's snapshot's (a PostgreSQL server's
	// client backends).
	Connections int `json:",omitempty"`
}

// Now is the time l's durations are measured at: the Taken of the source
// it came from (each source reads its own clock), else s.Taken.
func (s *Snapshot) Now(l *Lock) time.Time {
	if l.Source > 0 && l.Source < len(s.Sources) && !s.Sources[l.Source].Taken.IsZero() {
		return s.Sources[l.Source].Taken
	}
	return s.Taken
}

// Counts returns how many rows hold and how many wait.
func (s *Snapshot) Counts() (held, waiting int) {
	for i := range s.Locks {
		if s.Locks[i].Granted {
			held++
		} else {
			waiting++
		}
	}
	return held, waiting
}

// KindCount is the holders and waiters of one kind.
type KindCount struct {
	Kind          Kind
	Held, Waiting int
}

// CountKinds returns the holders and waiters of each kind present, in the
// order of Kinds (kinds not in Kinds last, in order of appearance).
func (s *Snapshot) CountKinds() []KindCount {
	var out []KindCount
	j := -1 // the last row's kind's place: rows of one kind mostly follow each other
	for i := range s.Locks {
		l := &s.Locks[i]
		if j < 0 || out[j].Kind != l.Kind {
			j = slices.IndexFunc(out, func(c KindCount) bool { return c.Kind == l.Kind })
			if j < 0 {
				j = len(out)
				out = append(out, KindCount{Kind: l.Kind})
			}
		}
		if l.Granted {
			out[j].Held++
		} else {
			out[j].Waiting++
		}
	}
	rank := func(k Kind) int {
		for i, x := range Kinds {
			if x == k {
				return i
			}
		}
		return len(Kinds)
	}
	// Few kinds: an insertion sort keeps first appearance among the unknown.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && rank(out[j].Kind) < rank(out[j-1].Kind); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// sourcedAs reports whether every lock carries Source i.
func sourcedAs(locks []Lock, i int) bool {
	for j := range locks {
		if locks[j].Source != i {
			return false
		}
	}
	return true
}

// Part is one source's answer, for Merge.
type Part struct {
	Name     string
	Snapshot Snapshot
	Err      error // the source failed: its locks are left out, Err says why
}

// Merge joins the answers of several sources into one snapshot: every
// answering source's locks in turn, each with Source set to its part's
// index; Taken, Connections, Latency, Interval and NewWaits from the first
// part that answered (the PostgreSQL server's, by convention first); Audit
// from every part, each with Source set likewise; one SourceStatus per
// part. The parts' audit slices are copied; their lock slices too, except
// that the locks of a part that are the only ones, with Source already its
// index (a lone first part's: the dashboard's server beside an empty lease
// source), are shared, not copied: the merged locks are read, never
// written (at rest at 1,000 locks the copy was a tenth of the dashboard's
// CPU and most of its garbage, issue 26).
func Merge(parts []Part) Snapshot {
	var out Snapshot
	n, alone := 0, -1
	for i := range parts {
		if parts[i].Err == nil && len(parts[i].Snapshot.Locks) > 0 {
			n += len(parts[i].Snapshot.Locks)
			alone = i
			if n > len(parts[i].Snapshot.Locks) || !sourcedAs(parts[i].Snapshot.Locks, i) {
				alone = -1 // copied
			}
		}
	}
	if alone >= 0 {
		out.Locks = parts[alone].Snapshot.Locks
	} else {
		out.Locks = make([]Lock, 0, n)
	}
	out.Sources = make([]SourceStatus, len(parts))
	primary := false
	for i := range parts {
		p := &parts[i]
		st := SourceStatus{Name: p.Name}
		if p.Err != nil {
			st.Err = p.Err.Error()
			out.Sources[i] = st
			continue
		}
		s := &p.Snapshot
		st.Taken, st.Latency, st.Locks, st.Connections = s.Taken, s.Latency, len(s.Locks), s.Connections
		st.Partial, st.Truncated = s.Partial, s.Truncated
		out.Sources[i] = st
		if !primary {
			primary = true
			out.Taken, out.Connections, out.Latency, out.Interval, out.NewWaits = s.Taken, s.Connections, s.Latency, s.Interval, s.NewWaits
		}
		if i != alone {
			for j := range s.Locks {
				l := s.Locks[j]
				l.Source = i
				out.Locks = append(out.Locks, l)
			}
		}
		for _, a := range s.Audit {
			a.Source = i
			out.Audit = append(out.Audit, a)
		}
		out.Ended = append(out.Ended, s.Ended...)
	}
	return out
}
