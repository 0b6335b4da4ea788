package lease

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/leasedb"
)

// store is one database's tables: PostgreSQL or SQLite. The rules (decide,
// schedule) are the Manager's; a store reads state and writes changes, each
// call in one transaction, with the database's clock.
type store interface {
	// attempt locks the row of a resource, reads its state, calls plan and
	// writes what plan returns, all in one transaction. errRetry means a
	// victim changed between the read and the write: try again.
	attempt(ctx context.Context, lockID string, plan func(*state) (*change, error)) (*applied, error)
	// acquire is an acquire's attempt: what attempt does, except that a
	// store may first try the common cases (a grant without recovery; a
	// waiter's row written or refreshed) as fast says, and fall back to
	// attempt with plan only when a stale holder might be taken over.
	//
	// When attempt or acquire fails, what it sent can commit nothing more:
	// whatever it committed is there for the cleanup (Manager.tidy) to
	// see. PostgreSQL ends the backend of a request pgx gave up on and
	// waits for it (pgStore.settle); SQLite's transaction has ended when
	// the call returns.
	acquire(ctx context.Context, lockID string, fast *fastAcquire, plan func(*state) (*change, error)) (*applied, error)
	// release deletes the grant token and wakes the resource's waiters. It
	// reports whether the row was there.
	release(ctx context.Context, lockID, token string) (bool, error)
	// renew moves the leases of the grants and jobs given forward to
	// now + lease, unless they have already passed, and returns the ones
	// renewed.
	renew(ctx context.Context, lease time.Duration, tokens, jobs []string) (renewed, error)
	setMetadata(ctx context.Context, token string, md []byte) (bool, error)
	// dropWaiter deletes a waiter row; a writer's wakes the resource's
	// waiters, since readers may have been held back by it.
	dropWaiter(ctx context.Context, lockID, id string) error
	// list reads every holder, waiter and job and the newest audit records.
	list(ctx context.Context) (*leasedb.Listing, error)
	audit(ctx context.Context, limit int) ([]leasedb.Audit, error)

	// enqueue inserts a queued job, or replaces one whose lease passed. It
	// reports false when a live job has the id.
	enqueue(ctx context.Context, j jobRow, lease time.Duration) (bool, error)
	// schedule reads every job and every project's last turn under the
	// scheduling lock, calls plan, and applies its drops, starts and turns;
	// it returns the jobs as they are after.
	schedule(ctx context.Context, plan func(now time.Time, jobs []jobRow, served map[string]int64) jobPlan) ([]jobRow, error)
	// jobRunning reports whether a job is running, and whether it exists.
	jobRunning(ctx context.Context, id string) (running, exists bool, err error)
	// finish deletes a job and wakes the job waiters; false if it was gone.
	finish(ctx context.Context, id string) (bool, error)

	// commitManifest marks a manifest row committed at path, in one
	// transaction that checks the grant token still holds the resource in
	// write mode and that no later grant committed the row (the fence).
	commitManifest(ctx context.Context, token, lockID, name, path string, fence int64) (time.Time, error)
	manifest(ctx context.Context, lockID, name string) (ManifestEntry, bool, error)
	// holdsWrite reports whether the grant token holds the resource in
	// write mode with its lease not passed, by the database's clock.
	holdsWrite(ctx context.Context, token, lockID string) (bool, error)

	hub() *hub
	// where names the tables for the family's held set
	// (lockcore.Entry.Store): a resource is one lock in one set of tables.
	where() string
	close() error
}

// errRetry: a victim row changed under the attempt; the attempt was rolled
// back and may be tried again at once.
var errRetry = errors.New("lease: a stale holder changed during recovery; retry")

// change is what one attempt writes.
type change struct {
	victims []holder // stale holders to remove, each with an audit record
	actor   string   // for the audit records
	reason  string
	grant   *grantRow // a new grant, or (upgrade) the new fence and mode of a grant
	waiter  *waiterRow
	// dropWaiter: the request's own waiter row, deleted with the grant.
	dropWaiter string
	purge      []string // dead waiter rows
	wake       bool     // wake the resource's waiters after the commit
}

func (c *change) empty() bool {
	return c == nil || (len(c.victims) == 0 && c.grant == nil && c.waiter == nil && c.dropWaiter == "" && len(c.purge) == 0)
}

type grantRow struct {
	token   string
	owner   string
	mode    Mode
	upgrade bool // update token's row: mode and a new fence
	lease   time.Duration
	grace   time.Duration // recorded, so listings can judge staleness
}

// fastAcquire is an acquire without recovery, which a store can send in
// one round trip: grant unless a holder in a conflicting mode exists (or,
// with precedence, a live writer waits), and keep the waiter row.
type fastAcquire struct {
	grant       grantRow
	conflicting []string   // the held modes that conflict with grant.mode
	precedence  bool       // writers waiting hold this request back
	waiter      *waiterRow // written (or refreshed) if not granted
	hasWaiter   bool       // waiter's row exists: delete it if granted
	// probe: grant nothing, only keep the waiter row and read the state
	// (applied.grantable). A waiter's retry is a probe unless the answer
	// to its last request showed the resource grantable: a retry sent
	// while the resource was held may run after the release, when its
	// process, killed meanwhile, can no longer use a grant (see Acquire).
	probe bool
}

// fastFor describes the fast path of a new grant; the rules come from
// compatible and decide.
func fastFor(g grantRow, w *waiterRow, hasWaiter bool) *fastAcquire {
	return &fastAcquire{grant: g, conflicting: conflictingModes()[g.mode], precedence: g.mode != Write, waiter: w, hasWaiter: hasWaiter}
}

// conflictingModes lists, for each mode, the held modes that conflict with
// it, as the fast path's statement takes them (shared: never modified).
var conflictingModes = sync.OnceValue(func() map[Mode][]string {
	c := map[Mode][]string{}
	for m := Read; m <= Upgradeable; m++ {
		for held := Read; held <= Upgradeable; held++ {
			if !compatible(held, m) {
				c[m] = append(c[m], held.String())
			}
		}
	}
	return c
})

type waiterRow struct {
	id    string
	owner string
	mode  Mode
	ttl   time.Duration
}

// applied is what an attempt wrote.
type applied struct {
	granted bool
	// grantable: a probe found the resource free for the request (no stale
	// holder to take over): the waiter asks again at once, for the grant.
	grantable    bool
	fence        int64
	leaseExpires time.Time
	grantedAt    time.Time
}

type renewed struct {
	tokens map[string]bool
	jobs   map[string]bool
}

// newToken returns a random identifier for a grant or a waiter row.
func newToken() string { return rand.Text() }

// jobsKey is the wake-up key of job slots; lock_ids always have a level
// prefix, so it cannot collide with one.
const jobsKey = "*jobs"

// notSentError is a store's failure before it sent anything of a request
// (no connection: the pool stayed busy until the context ended, or it is
// closed): nothing of it can commit, so there is nothing to clean up.
type notSentError struct{ err error }

func (e notSentError) Error() string { return e.err.Error() }
func (e notSentError) Unwrap() error { return e.err }

// notSent reports whether err is a request's failure before anything of it
// was sent.
func notSent(err error) bool {
	var ns notSentError
	return errors.As(err, &ns)
}
