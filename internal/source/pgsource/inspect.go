package pgsource

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/locktop/locktop/internal/source/pglocks"

	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// Inspect reads every advisory lock on the server, holders and waiters,
// and every other heavyweight lock someone waits for, in one statement
// (pglocks.Read), and turns the rows into model values named by the
// registry. The advisory locks come first; the other kinds follow, one
// group per locked object (see others). Snapshot.Locks are grouped by key (in database and
// key order), holders first, then waiters in queue order; each waiter's
// BlockedBy names the holders of its key in a conflicting mode (or, for a
// share waiter queued behind an exclusive waiter, that waiter). The server
// does not record when a lock was granted, so held times are lower bounds
// (see bound): for a holder whose session is idle, the time since it went
// idle; for a holder that blocks a waiter, the time that waiter has waited;
// otherwise zero (a Monitor, which polls over time, does better).
func Inspect(ctx context.Context, q pglocks.Querier) (model.Snapshot, error) {
	return InspectWith(ctx, q, registry.Builtin())
}

// InspectWith is Inspect naming keys with reg: a name applies only in the
// databases, and to the sessions' applications, its entry says.
func InspectWith(ctx context.Context, q pglocks.Querier, reg *registry.Registry) (model.Snapshot, error) {
	t, err := pglocks.Read(ctx, q)
	if err != nil {
		return model.Snapshot{}, err
	}
	snap := build(&t, reg)
	bound(snap.Locks, nil)
	return snap, nil
}

// build turns the rows read into model locks, without the held bounds that
// waiters give: a Monitor works those out with what it saw in earlier
// polls.
func build(t *pglocks.Table, reg *registry.Registry) model.Snapshot {
	return buildWith(t, reg, &backends{})
}

// buildWith is build converting the sessions with sessions, which may
// hold the last poll's (see backends).
func buildWith(t *pglocks.Table, reg *registry.Registry, sessions *backends) model.Snapshot {
	// Room for the other kinds too, so appending them does not copy the
	// advisory rows again.
	snap := model.Snapshot{Taken: t.Taken, Connections: t.Connections, Locks: make([]model.Lock, len(t.Rows), len(t.Rows)+len(t.Others))}
	kn := keyNamer{reg: reg}
	var (
		ns       string
		groupEnd int
	)
	for i := range t.Rows {
		r := &t.Rows[i]
		if i == groupEnd {
			// Rows come grouped by database and key: name each key once.
			groupEnd = i + 1
			for groupEnd < len(t.Rows) && t.Rows[groupEnd].Key == r.Key && t.Rows[groupEnd].Database == r.Database {
				groupEnd++
			}
			ns = kn.name(t.Rows[i:groupEnd])
		}
		k, b := r.Key, r.Backend
		mb, owner := sessions.of(b)
		mode := model.ModeExclusive
		if r.Share {
			mode = model.ModeShare
		}
		// Field by field into the zeroed row, not a model.Lock literal
		// copied in: the copy of a whole row runs the GC's write barrier over
		// every pointer slot of the row, most of them empty (issue 26).
		l := &snap.Locks[i]
		l.Kind, l.PID, l.Database, l.Backend, l.Owner = model.KindAdvisory, r.PID, r.Database, mb, owner
		l.Mode, l.Granted, l.Namespace, l.EntityID, l.Pair = mode, r.Granted, ns, k.EntityID(), k.IsPair()
		if !r.Granted {
			l.WaitStart = r.WaitStart
		} else if idle(b.State) && !b.StateChange.IsZero() {
			// The session is idle, so whatever took the lock has finished:
			// it has been held at least since the session went idle.
			l.HeldSince = b.StateChange
		}
	}
	queue(snap.Locks)
	snap.Locks = others(t, snap.Locks, sessions)
	return snap
}

// keyNamer names the keys of one poll's rows. A registry entry names a key
// in a database when it applies to the key's database and to the
// application of some session holding or waiting for it there, so every
// row of one key gets one name. The rows come grouped by database and key,
// so a key's sessions are the rows of its group: no map of every key is
// built. Keys no entry could name (most, on a busy server) and keys whose
// entry applies everywhere (registry.Unscoped) are named without looking
// at their sessions; a two-int key's name depends on its space, not its
// id, so the keys of one space, database and application (hundreds of a
// kind, often, in a row) are named once.
type keyNamer struct {
	reg *registry.Registry
	// The last two-int space met, and what the registry said of it.
	space      int32
	spaceSeen  bool
	unscoped   string
	isUnscoped bool
	candidates bool
	// The last scoped name of a two-int key with one application.
	last    scoped
	lastNS  string
	hasLast bool
	bySpace map[scoped]string
	spaces  map[int32]string // unregistered spaces, formatted
	apps    []string         // Namespace does not keep it
}

// scoped is a two-int space named in one database for one application.
type scoped struct {
	db, app string
	space   int32
}

// name returns the namespace of the key of group, the rows of one key in
// one database.
func (n *keyNamer) name(group []pglocks.Row) string {
	r := &group[0]
	k := r.Key
	var unscoped string
	var isUnscoped, candidates bool
	if k.IsPair() {
		if !n.spaceSeen || n.space != k.Space() {
			n.space, n.spaceSeen = k.Space(), true
			n.unscoped, n.isUnscoped = n.reg.Unscoped(true, k.Space(), k.Int64())
			n.candidates = n.reg.Candidates(true, k.Space(), k.Int64())
		}
		unscoped, isUnscoped, candidates = n.unscoped, n.isUnscoped, n.candidates
	} else {
		unscoped, isUnscoped = n.reg.Unscoped(false, k.Space(), k.Int64())
		candidates = !isUnscoped && n.reg.Candidates(false, k.Space(), k.Int64())
	}
	switch {
	case isUnscoped:
		return unscoped
	case candidates:
		app := r.Backend.Application
		one := true // one application among the group's sessions
		for i := 1; one && i < len(group); i++ {
			one = group[i].Backend.Application == app
		}
		if !k.IsPair() || !one {
			n.apps = append(n.apps[:0], app)
			for i := 1; i < len(group); i++ {
				if a := group[i].Backend.Application; !slices.Contains(n.apps, a) {
					n.apps = append(n.apps, a)
				}
			}
			return n.reg.Namespace(k.IsPair(), k.Space(), k.Int64(), registry.Scope{Database: r.Database, Applications: n.apps})
		}
		// Compared before anything is written: a key of the same space,
		// database and application as the last costs no write (each would
		// be a write barrier while the collector runs, as it often does at
		// 10,000 locks a poll).
		if n.hasLast && n.last.space == k.Space() && n.last.app == app && n.last.db == r.Database {
			return n.lastNS
		}
		sc := scoped{r.Database, app, k.Space()}
		ns, ok := n.bySpace[sc]
		if !ok {
			n.apps = append(n.apps[:0], app)
			ns = n.reg.Namespace(true, k.Space(), k.Int64(), registry.Scope{Database: r.Database, Applications: n.apps})
			if n.bySpace == nil {
				n.bySpace = map[scoped]string{}
			}
			n.bySpace[sc] = ns
		}
		n.last, n.lastNS, n.hasLast = sc, ns, true
		return ns
	case !k.IsPair():
		return ""
	}
	ns, ok := n.spaces[k.Space()]
	if !ok {
		ns = strconv.Itoa(int(k.Space()))
		if n.spaces == nil {
			n.spaces = map[int32]string{}
		}
		n.spaces[k.Space()] = ns
	}
	return ns
}

// idle reports whether a backend state means no statement is running.
func idle(state string) bool {
	return state == "idle" || state == "idle in transaction" || state == "idle in transaction (aborted)"
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
			model.CompareBool(!a.Pair, !b.Pair),
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.EntityID, b.EntityID),
			model.CompareBool(!a.Granted, !b.Granted),
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
		// EntityID first: it tells most neighbours apart without building
		// two KeyIDs of eleven fields each.
		for j < len(locks) && locks[i].EntityID == locks[j].EntityID && locks[i].KeyID() == locks[j].KeyID() {
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
				// A session's own shared hold does not block its upgrade.
				if group[h].PID != group[w].PID && conflicts(group[h].Mode, group[w].Mode) {
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

// conflicts reports whether advisory lock modes conflict: share locks only
// conflict with exclusive ones.
func conflicts(held, want string) bool {
	return held == model.ModeExclusive || want == model.ModeExclusive
}
