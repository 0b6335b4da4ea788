package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/locktop/locktop/model"
)

// LocksDocument is the body of GET /api/locks and of `locktop snapshot
// --json`: every kind of lock from every source in one list, each lock
// with its kind and the fields that apply to it.
type LocksDocument struct {
	// Taken is the PostgreSQL server's clock when the locks were read.
	Taken   time.Time `json:"taken"`
	Total   int       `json:"total"`
	Held    int       `json:"held"`
	Waiting int       `json:"waiting"`
	// Kinds counts holders and waiters per kind present.
	Kinds []KindCount `json:"kinds"`
	// Connections is the number of client backends on the server.
	Connections int `json:"connections"`
	// Warning says what the monitor's role cannot see (no pg_monitor).
	Warning string `json:"warning,omitempty"`
	// Sources says how each source answered; a failed one has an error
	// and no locks in the list.
	Sources []SourceDoc `json:"sources"`
	// Locks are grouped by key, holders first, then waiters in queue
	// order; PostgreSQL's first, then each other source's.
	Locks []LockDoc `json:"locks"`
	// At is the moment asked for with ?at= (the locks are the history's
	// newest snapshot at or before it, taken at Taken); absent for the
	// live document.
	At *time.Time `json:"at,omitempty"`
	// Age, Stale and StaleReason are as in Document; with ?at=, Age is At
	// less Taken.
	Age         float64 `json:"age"`
	Stale       bool    `json:"stale"`
	StaleReason string  `json:"stale_reason,omitempty"`
}

// KindCount is the holders and waiters of one kind.
type KindCount struct {
	Kind    string `json:"kind"`
	Held    int    `json:"held"`
	Waiting int    `json:"waiting"`
}

// SourceDoc is how one source answered.
type SourceDoc struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Taken is the source's clock when it was read; null when it failed.
	Taken *time.Time `json:"taken"`
	// Latency is its poll's duration in seconds.
	Latency float64 `json:"latency"`
	Locks   int     `json:"locks"`
	Error   string  `json:"error,omitempty"`
	// Partial names the parts of the source that did not answer (a Redis
	// Cluster's nodes, "127.0.0.1:7002: connection refused"): its locks are
	// the other parts'.
	Partial []string `json:"partial,omitempty"`
	// Truncated says a bound cut the source's listing.
	Truncated bool `json:"truncated,omitempty"`
}

// LockDoc is one holder or waiter of any kind. Fields a kind does not
// have are left out: a Redis or lease lock has no pid, no database and no
// query; a PostgreSQL lock no owner, fence or expiry. Times are RFC 3339,
// durations seconds as numbers, measured at the lock's own source's clock.
type LockDoc struct {
	// Kind is "advisory", "row", "transactionid", "relation", "other",
	// "redis" or "lease".
	Kind string `json:"kind"`
	// Key is the key as people read it: "AGENT 7", "public.turns row
	// (0,3)", "transaction 725", "sesslock:t1:a1:c1:web", "map:m1".
	Key string `json:"key"`
	// Namespace is the registry's name of the key's namespace or pattern
	// ("AGENT", "SESSION", "MAP"), when it has one.
	Namespace string `json:"namespace,omitempty"`
	// Source names the source the lock was read from.
	Source string `json:"source"`
	// Server is the name of the target the lock was read from, when
	// locktop watches several (--target NAME=…); absent with one.
	Server  string `json:"server,omitempty"`
	Mode    string `json:"mode"`
	Granted bool   `json:"granted"`
	// Holder names who holds the lock on a holding row: a pid as a string,
	// or an owner. Absent on a waiting row, whose holders are BlockedBy or
	// BlockedByOwners.
	Holder *string `json:"holder,omitempty"`

	// PostgreSQL kinds.
	PID             *int32     `json:"pid,omitempty"`
	Database        string     `json:"database,omitempty"`
	User            string     `json:"user,omitempty"`
	ApplicationName string     `json:"application_name,omitempty"`
	ClientAddr      string     `json:"client_addr,omitempty"`
	State           string     `json:"state,omitempty"`
	Query           string     `json:"query,omitempty"`
	QueryStart      *time.Time `json:"query_start,omitempty"`
	EntityID        *int64     `json:"entity_id,omitempty"` // advisory
	LockType        string     `json:"lock_type,omitempty"` // other PostgreSQL kinds: pg_locks.locktype
	Relation        string     `json:"relation,omitempty"`
	// RelationOID is the relation's oid, given when its name is not known
	// (a database the monitor could not enter): key reads "DB oid N".
	RelationOID uint32 `json:"relation_oid,omitempty"`
	Row         string `json:"row,omitempty"`
	Object      string `json:"object,omitempty"`

	// Redis and lease kinds.
	Name         string     `json:"name,omitempty"`
	Owner        string     `json:"owner,omitempty"`
	Token        string     `json:"token_prefix,omitempty"`
	Fence        *int64     `json:"fence,omitempty"`
	Expires      *time.Time `json:"expires,omitempty"`
	Left         *float64   `json:"left,omitempty"` // TTL or lease left; negative once passed
	Heartbeat    *time.Time `json:"heartbeat,omitempty"`
	HeartbeatAge *float64   `json:"heartbeat_age,omitempty"`
	Stale        *bool      `json:"stale,omitempty"` // leases

	// HeldSince and Held are lower bounds for PostgreSQL kinds (see
	// Document's); XactStart, when the holder's transaction began, bounds a
	// transaction's lock from above.
	HeldSince       *time.Time `json:"held_since,omitempty"`
	Held            *float64   `json:"held,omitempty"`
	XactStart       *time.Time `json:"xact_start,omitempty"`
	WaitStart       *time.Time `json:"wait_start,omitempty"`
	Waited          *float64   `json:"waited,omitempty"`
	QueuePosition   int        `json:"queue_position"`
	BlockedBy       []int32    `json:"blocked_by,omitempty"`
	BlockedByOwners []string   `json:"blocked_by_owners,omitempty"`
}

// NewLocksDocument turns a snapshot of every source into the /api/locks
// document. info supplies the warning about what the monitor's role
// cannot see.
func NewLocksDocument(s model.Snapshot, info model.ServerInfo) LocksDocument {
	held, waiting := s.Counts()
	d := LocksDocument{
		Taken: s.Taken, Total: len(s.Locks), Held: held, Waiting: waiting,
		Connections: s.Connections, Warning: info.Warning,
		Kinds: []KindCount{}, Sources: []SourceDoc{}, Locks: make([]LockDoc, len(s.Locks)),
	}
	for _, k := range s.CountKinds() {
		d.Kinds = append(d.Kinds, KindCount{Kind: string(k.Kind), Held: k.Held, Waiting: k.Waiting})
	}
	for _, src := range s.Sources {
		d.Sources = append(d.Sources, SourceDoc{Name: src.Name, OK: src.Err == "", Taken: timePtr(src.Taken),
			Latency: seconds(src.Latency), Locks: src.Locks, Error: oneLine(src.Err), Partial: src.Partial, Truncated: src.Truncated})
	}
	for i := range s.Locks {
		l := &s.Locks[i]
		name := ""
		if l.Source < len(s.Sources) {
			name = s.Sources[l.Source].Name
		} else if len(s.Sources) == 0 {
			name = "postgres"
		}
		d.Locks[i] = newLockDoc(l, s.Now(l), name)
	}
	return d
}

func newLockDoc(l *model.Lock, now time.Time, source string) LockDoc {
	kind := l.Kind
	if kind == "" {
		kind = model.KindAdvisory
	}
	out := LockDoc{
		Kind: string(kind), Key: l.KeyLabel(), Namespace: l.Namespace, Source: source, Server: l.Server,
		Mode: l.Mode, Granted: l.Granted, QueuePosition: l.QueuePos,
		HeldSince: timePtr(l.HeldSince), WaitStart: timePtr(l.WaitStart), XactStart: timePtr(l.Session().XactStart),
	}
	if l.Granted {
		h := l.Holder()
		out.Holder = &h
		if !l.HeldSince.IsZero() {
			out.Held = secondsPtr(l.Held(now))
		}
		out.WaitStart = nil
	} else {
		out.Waited = secondsPtr(l.Waited(now))
		out.BlockedBy = append([]int32{}, l.BlockedBy...)
		out.BlockedByOwners = l.BlockedByOwners
	}
	if kind.PG() {
		if l.PID != 0 {
			pid := l.PID
			out.PID = &pid
		}
		out.Database, out.User, out.ApplicationName, out.ClientAddr = l.Database, l.Session().User, l.Session().ApplicationName, l.Session().ClientAddr
		out.State, out.Query, out.QueryStart = l.Session().State, l.Session().Query, timePtr(l.Session().QueryStart)
		if kind == model.KindAdvisory {
			id := l.EntityID
			out.EntityID = &id
		} else {
			out.LockType, out.Relation, out.Row, out.Object = l.LockType, l.Relation, l.Row, l.Object
			if l.Relation == "" {
				out.RelationOID = l.RelationOID
			}
		}
		return out
	}
	out.Name, out.Owner, out.Token = l.Name, l.Owner, l.Token
	if l.Granted {
		f := l.Fence
		out.Fence = &f
	}
	if !l.Expires.IsZero() {
		out.Expires = timePtr(l.Expires)
		left := seconds(l.Left(now))
		out.Left = &left
	}
	if kind == model.KindLease {
		if !l.Heartbeat.IsZero() {
			out.Heartbeat = timePtr(l.Heartbeat)
			out.HeartbeatAge = secondsPtr(l.HeartbeatAge(now))
		}
		stale := l.Stale
		out.Stale = &stale
	}
	return out
}

func secondsPtr(d time.Duration) *float64 {
	s := seconds(d)
	return &s
}

// allLocks serves GET /api/locks from the same snapshots as
// /api/advisory-locks.
func (h *handler) allLocks(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("at") {
		h.locksAt(w, r)
		return
	}
	served, ok := h.serve(w, r, "/api/locks")
	if !ok {
		return
	}
	doc := NewLocksDocument(served.Snapshot, h.info())
	doc.Age = seconds(served.Age)
	doc.Stale, doc.StaleReason = served.Stale, oneLine(served.Reason)
	writeJSON(w, http.StatusOK, doc)
}

// serve gets the snapshot a request is answered from; on failure it has
// answered 503 already.
func (h *handler) serve(w http.ResponseWriter, r *http.Request, path string) (Served, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var served Served
	var err error
	if h.d.Latest != nil {
		served, err = h.d.Latest.Serve(ctx)
	} else {
		served.Snapshot, err = h.d.Snapshot(ctx)
	}
	if err == nil {
		h.d.QueryText.Snapshot(&served.Snapshot)
	}
	if err != nil {
		if r.Context().Err() == nil {
			h.d.Log.Warn("GET "+path+" failed", "err", err)
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": oneLine(err.Error())})
		return Served{}, false
	}
	return served, true
}

func (h *handler) info() model.ServerInfo {
	if h.d.Info != nil {
		return h.d.Info()
	}
	return model.ServerInfo{}
}
