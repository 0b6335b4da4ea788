package pgsource

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"github.com/locktop/locktop/internal/source/pglocks"

	"github.com/locktop/locktop/lockcore"
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
	// Room for the other kinds too, so appending them does not copy the
	// advisory rows again.
	snap := model.Snapshot{Taken: t.Taken, Connections: t.Connections, Locks: make([]model.Lock, len(t.Rows), len(t.Rows)+len(t.Others))}
	ns := keyNamer(t.Rows, reg)
	for i := range t.Rows {
		r := &t.Rows[i]
		k, b := r.Key, r.Backend
		mode := model.ModeExclusive
		if r.Share {
			mode = model.ModeShare
		}
		l := &snap.Locks[i]
		*l = model.Lock{
			Kind: model.KindAdvisory, PID: r.PID, Database: r.Database,
			User: b.User, ApplicationName: appOf(b.Application), ClientAddr: b.ClientAddr, State: b.State, Query: b.Query,
			QueryStart: b.QueryStart, StateChange: b.StateChange, XactStart: b.XactStart, Owner: ownerOf(b.Application),
			Mode: mode, Granted: r.Granted, Namespace: ns(r), EntityID: k.EntityID(), Pair: k.IsPair(),
		}
		if !r.Granted {
			l.WaitStart = r.WaitStart
		} else if idle(b.State) && !b.StateChange.IsZero() {
			// The session is idle, so whatever took the lock has finished:
			// it has been held at least since the session went idle.
			l.HeldSince = b.StateChange
		}
	}
	queue(snap.Locks)
	snap.Locks = others(t, snap.Locks)
	return snap
}

// placed is a key in one database: what a registry entry's scope is
// decided for.
type placed struct {
	db  string
	key lockcore.Key
}

// keyNamer returns the namespace of each row's key. A registry entry names a
// key in a database when it applies to the key's database and to the
// application of some session holding or waiting for it there, so every
// row of one key gets one name. Keys no entry could name (most, on a busy
// server) cost no more than before: unregistered spaces are formatted once
// per poll, not per row, and their sessions are not gathered; nor are those
// of keys whose entry applies everywhere (registry.Unscoped), which are
// most registered keys.
func keyNamer(rows []pglocks.Row, reg *registry.Registry) func(*pglocks.Row) string {
	// One map of values, and no slice for a key whose sessions share one
	// application (the usual case): this runs per key at every poll of
	// every target.
	type candidate struct {
		app   string   // the first session's application
		more  []string // the others', if they differ
		ns    string
		named bool
	}
	var cands map[placed]candidate
	for i := range rows {
		r := &rows[i]
		if _, ok := reg.Unscoped(r.Key.IsPair(), r.Key.Space(), r.Key.Int64()); ok {
			continue // named alike everywhere: no sessions to gather
		}
		if !reg.Candidates(r.Key.IsPair(), r.Key.Space(), r.Key.Int64()) {
			continue
		}
		if cands == nil {
			cands = make(map[placed]candidate, len(rows)-i)
		}
		p := placed{r.Database, r.Key}
		a := r.Backend.Application
		c, ok := cands[p]
		switch {
		case !ok:
			cands[p] = candidate{app: a}
		case a != c.app && !slices.Contains(c.more, a):
			c.more = append(c.more, a)
			cands[p] = c
		}
	}
	spaces := map[int32]string{}
	// A two-int key's entries are its space's, so its name depends on the
	// space, not the key: keys of one space, database and application
	// (hundreds of a kind, often) are named once.
	type scoped struct {
		db, app string
		space   int32
	}
	bySpace := map[scoped]string{}
	var apps []string // Namespace does not keep it
	return func(r *pglocks.Row) string {
		k := r.Key
		if ns, ok := reg.Unscoped(k.IsPair(), k.Space(), k.Int64()); ok {
			return ns
		}
		p := placed{r.Database, k}
		if c, ok := cands[p]; ok {
			if c.named {
				return c.ns
			}
			sc := scoped{r.Database, c.app, k.Space()}
			if ns, ok := bySpace[sc]; ok && k.IsPair() && c.more == nil {
				c.ns = ns
			} else {
				apps = append(append(apps[:0], c.app), c.more...)
				c.ns = reg.Namespace(k.IsPair(), k.Space(), k.Int64(), registry.Scope{Database: r.Database, Applications: apps})
				if k.IsPair() && c.more == nil {
					bySpace[sc] = c.ns
				}
			}
			c.named = true
			cands[p] = c
			return c.ns
		}
		if !k.IsPair() {
			return ""
		}
		ns, ok := spaces[k.Space()]
		if !ok {
			ns = strconv.Itoa(int(k.Space()))
			spaces[k.Space()] = ns
		}
		return ns
	}
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
		for j < len(locks) && locks[i].KeyID() == locks[j].KeyID() {
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

// ownerOf is the owner id a backend's application_name carries, if any.
func ownerOf(app string) string {
	_, owner, _ := model.OwnerFromApp(app)
	return owner
}

// appOf is a backend's application_name without the owner id it carries:
// the id is the row's Owner, and the APPLICATION column stays readable.
func appOf(app string) string {
	app, _, _ = model.OwnerFromApp(app)
	return app
}
