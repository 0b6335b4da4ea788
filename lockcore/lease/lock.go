package lease

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// Lock is one held grant. Release it exactly once; further calls do nothing.
type Lock struct {
	m     *Manager
	res   Resource
	token string // the grant's identity in the table, kept across an upgrade
	owner string
	slot  *JobSlot        // the job that owns it, if any
	entry *lockcore.Entry // this lock's place in its context's held set

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu        sync.Mutex
	mode      Mode
	fence     int64
	grantedAt time.Time
	deadline  time.Time // local: when the lease runs out unless renewed (the Manager's expiry timer watches it)
	err       error     // nil while held; wraps ErrLost, or ErrReleased
	released  bool
}

// heldIn calls fn for every lease lock ctx holds (the family's held set,
// lockcore.Held), newest first, until fn returns false.
func heldIn(ctx context.Context, fn func(*Lock) bool) {
	for e := lockcore.Held(ctx); e != nil; e = e.Next() {
		if l, ok := e.Hold.(*Lock); ok && e.Kind == lockcore.KindLease {
			if !fn(l) {
				return
			}
		}
	}
}

// checkOrder refuses r when ctx holds a live lock that sorts at or after r
// on m's tables (seed 004 §8.1's global order: level, then id, then the
// tables' name, where). The same resource again counts: a second grant of
// it could wait behind a writer that waits for the first. The order is
// global across Managers, as it was before a lock knew its tables: two
// processes that nest map:m1 of one database and map:m2 of another the
// opposite way round would deadlock, and neither's order graph could see
// it (bp13's TestAttackTwoProcessesTwoStoresOpposite). The same resource
// on two sets of tables is two locks, taken in the order of their names
// (stable across processes: the tables' id and schema, a file's resolved
// path).
func (m *Manager) checkOrder(ctx context.Context, r Resource) (err error) {
	where := m.st.where()
	heldIn(ctx, func(h *Lock) bool {
		if h.Err() != nil {
			return true
		}
		c := compare(h.res, r)
		if c == 0 {
			c = cmp.Compare(h.entry.Store, where)
		}
		switch {
		case c < 0:
		case h.res == r && h.entry.Store != where:
			err = fmt.Errorf("%w: %s of %s is held in this context, and the one of %s comes before it",
				ErrLockOrder, h.res, h.entry.Store, where)
		default:
			err = fmt.Errorf("%w: %s is held in this context", ErrLockOrder, h.res)
		}
		return err == nil
	})
	return err
}

// Resource returns the locked resource.
func (l *Lock) Resource() Resource { return l.res }

// Mode returns the mode the lock is held in (Write after an Upgrade).
func (l *Lock) Mode() Mode {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mode
}

// Fence returns the grant's fencing token: strictly greater than the fence
// of every earlier grant of the same resource, steals and upgrades
// included. Storage that refuses writes with a fence lower than the last
// it saw cannot be written by a holder that lost its lease.
func (l *Lock) Fence() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fence
}

// Owner returns the owner recorded in the table: the Manager's Owner, the
// task's (lockcore.WithOwner), or "job:ID" for a lock taken with a job's
// context.
func (l *Lock) Owner() string { return l.owner }

// Context returns a context derived from the one the lock was acquired
// with. It carries the held resource, for the order check of acquires made
// with it, and it is cancelled when the lock is lost (cause: an error
// wrapping ErrLost) or released (cause ErrReleased), or when the acquire's
// context ends. Release locks taken with it before the lock itself (defer
// does that).
func (l *Lock) Context() context.Context { return l.ctx }

// Done is closed once the lock is released or lost.
func (l *Lock) Done() <-chan struct{} { return l.done }

// Err is nil while the lock is held, wraps ErrLost once it is lost, and is
// ErrReleased after Release.
func (l *Lock) Err() error {
	l.mu.Lock()
	err, late := l.err, lapsed(l.err, l.deadline)
	l.mu.Unlock()
	if late {
		l.expire()
		return l.Err()
	}
	return err
}

// lapsed says a holder that has seen no error yet is past its local
// deadline. The deadline decides, not the timer that fires at it: a late
// timer (a starved scheduler) must not leave a lock or a job's slot
// looking held when the database may have let another holder take it.
func lapsed(err error, deadline time.Time) bool {
	return err == nil && !deadline.IsZero() && !time.Now().Before(deadline)
}

// FenceOf returns the fence of r as held through m in ctx (a Lock's
// context or one derived from it), if ctx holds r in m's tables: the fence
// to write with to the storage those tables guard.
func (m *Manager) FenceOf(ctx context.Context, r Resource) (fence int64, ok bool) {
	return liveFence(m.LockOf(ctx, r))
}

// FenceOf returns the fence of r as held in ctx (a Lock's context or one
// derived from it), if ctx holds r. A context that holds r in two sets of
// tables (Managers on two databases, schemas or files) reports false
// rather than the wrong one's fence: use Manager.FenceOf. Locks the
// context carries that are released or lost hold nothing, and count for
// neither.
func FenceOf(ctx context.Context, r Resource) (fence int64, ok bool) {
	return liveFence(lockOf(ctx, r, true))
}

// liveFence is the fence of l while it is held.
func liveFence(l *Lock) (int64, bool) {
	if l == nil || l.Err() != nil {
		return 0, false
	}
	return l.Fence(), true
}

// Acquire takes r in mode, waiting up to Options.Wait, or lockcore.Wait(d)
// (ErrTimeout), or until ctx ends. It refuses at once with ErrLockOrder when ctx holds a resource
// that sorts at or after r. While it waits, its waiter row tells monitors
// who waits for what since when, and a writer's row holds back new readers.
// A holder whose lease has lapsed is taken over only when it is stale, and
// the takeover is audited in the same transaction.
func (m *Manager) Acquire(ctx context.Context, r Resource, mode Mode, opts ...lockcore.AcquireOption) (*Lock, error) {
	wait := cmp.Or(lockcore.Resolve(opts...).Wait, m.opts.Wait)
	return m.acquire(ctx, ctx, "acquire", r, mode, true, time.Now().Add(wait))
}

// TryAcquire takes r in mode if it can at once, and returns ErrLocked if it
// cannot. A stale holder in its way is taken over (and audited).
func (m *Manager) TryAcquire(ctx context.Context, r Resource, mode Mode) (*Lock, error) {
	return m.acquire(ctx, ctx, "try", r, mode, false, time.Time{})
}

// Request is one lock of AcquireAll.
type Request struct {
	Resource Resource
	Mode     Mode
}

// AcquireAll takes every request in the global order (projects, then maps,
// then sketches; by id within a level), whatever order they are given in,
// and returns the locks in that order: all of them, or none (what it took
// is released again). Options.Wait bounds the whole. Each lock's context
// carries the ones before it; the last one's carries them all. The same
// resource twice is refused with ErrLockOrder.
func (m *Manager) AcquireAll(ctx context.Context, reqs ...Request) ([]*Lock, error) {
	return m.acquireAll(ctx, time.Now().Add(m.opts.Wait), reqs)
}

// acquireAll is AcquireAll bounded by deadline.
func (m *Manager) acquireAll(ctx context.Context, deadline time.Time, reqs []Request) ([]*Lock, error) {
	sorted := slices.Clone(reqs)
	slices.SortStableFunc(sorted, func(a, b Request) int { return compare(a.Resource, b.Resource) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Resource == sorted[i-1].Resource {
			return nil, &Error{Op: "acquire all", Resource: sorted[i].Resource,
				Err: fmt.Errorf("%w: requested twice", ErrLockOrder)}
		}
	}
	cur := ctx
	var locks []*Lock
	for _, q := range sorted {
		l, err := m.acquire(ctx, cur, "acquire", q.Resource, q.Mode, true, deadline)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			for _, h := range slices.Backward(locks) {
				_ = h.Release(rctx)
			}
			cancel()
			return nil, err
		}
		locks = append(locks, l)
		// The next lock's context: the caller's, plus every lock so far.
		cur = lockcore.Carry(ctx, l.entry)
	}
	return locks, nil
}

// acquire is Acquire (wait) and TryAcquire. parent is what the lock's
// context derives from; order and job are read from it.
func (m *Manager) acquire(ctx, parent context.Context, op string, r Resource, mode Mode, wait bool, deadline time.Time) (*Lock, error) {
	start := time.Now()
	fail := func(err error) (*Lock, error) {
		e := &Error{Op: op, Resource: r, Mode: mode, Err: err}
		if wait {
			e.Waited = time.Since(start)
		}
		return nil, e
	}
	if err := r.validate(); err != nil {
		return fail(err)
	}
	if !mode.valid() {
		return fail(fmt.Errorf("lease: unknown mode %d", int(mode)))
	}
	if err := m.checkOrder(parent, r); err != nil {
		return fail(err)
	}
	entry, err := lockcore.Check(parent, lockcore.KindLease, m.st.where(), r.String(), r.Level.String())
	if err != nil {
		return fail(err)
	}
	if m.isClosed() {
		return fail(ErrClosed)
	}
	slot := slotIn(parent)
	owner := lockcore.OwnerIn(parent, m.opts.Owner)
	if slot != nil {
		if err := slot.Err(); err != nil {
			return fail(err)
		}
		owner = slot.owner
	}
	lockID := r.String()
	token := newToken()
	q := request{mode: mode, grace: m.opts.Grace}
	var (
		t         *ticket
		hasWaiter bool
		actx      = ctx
	)
	if wait {
		q.waiterID = newToken()
		t = m.st.hub().join(lockID, false)
		var end func()
		actx, end = m.waits.With(ctx, deadline)
		defer end()
	}
	bo := newBackoff(m.opts)
	// mayGrant: the next request may be granted. A waiter's retry is sent
	// on a timer or a wake-up, while the resource may still be held; were
	// its process killed with it in flight, PostgreSQL would run it all
	// the same, perhaps after the release, and hand the lock to a process
	// that is gone (nobody renews it: it lapses after its lease and grace).
	// So a retry only probes, and the grant is asked for in the request
	// after an answer that showed the resource grantable: a waiter killed
	// before it saw the resource free is handed nothing.
	mayGrant := true
	for {
		sent := time.Now()
		var v verdict
		g := grantRow{token: token, owner: owner, mode: mode, lease: m.opts.Lease, grace: m.opts.Grace}
		var w *waiterRow
		if wait {
			w = &waiterRow{id: q.waiterID, owner: owner, mode: mode, ttl: m.opts.waiterTTL()}
		}
		f := fastFor(g, w, hasWaiter)
		f.probe = !mayGrant
		res, err := m.st.acquire(actx, lockID, f, func(s *state) (*change, error) {
			v = decide(s, q)
			ch := &change{purge: deadWaiters(s)}
			switch {
			case v.grant:
				ch.victims, ch.actor, ch.reason, ch.grant = v.victims, owner, "lease expired", &g
				if wait { // the row may exist even at the first attempt: a fast path wrote it
					ch.dropWaiter = q.waiterID
				}
			case wait:
				ch.waiter = w
			}
			return ch, nil
		})
		if errors.Is(err, errRetry) {
			continue
		}
		busy := errors.Is(err, ErrBusy) && wait && actx.Err() == nil
		if busy {
			res = &applied{} // not granted: back off and try again
		}
		if err != nil && !busy {
			// The commit may have happened as the call failed: remove what
			// this attempt may have left, as lockcore does after a failed
			// advisory acquire (PostgreSQL bug #17686). The store returns
			// only once the request can commit nothing more, also one in
			// flight when the wait ended: the cleanup is final. A request
			// never sent (no pool connection came before the context ended)
			// left nothing; only an earlier attempt's waiter row is removed,
			// and an acquire that has none returns at once rather than queue
			// on the same busy pool for cleanupTimeout.
			if notSent(err) {
				if hasWaiter {
					m.tidy(lockID, "", q.waiterID, true)
				}
			} else {
				m.tidy(lockID, token, q.waiterID, hasWaiter || wait)
			}
			if t != nil {
				m.st.hub().leave(lockID, t, false)
			}
			if ctx.Err() == nil && actx.Err() != nil {
				return fail(ErrTimeout)
			}
			if ctx.Err() != nil {
				return fail(context.Cause(ctx))
			}
			return fail(err)
		}
		if res.granted {
			if t != nil {
				// Readers and the upgradeable holder can share: let the
				// next waiter try too.
				m.st.hub().leave(lockID, t, mode != Write)
			}
			return m.newLock(parent, entry, r, token, owner, slot, mode, res, sent), nil
		}
		if !wait {
			return fail(ErrLocked)
		}
		// A busy file (another process writing) is waited out like a
		// holder: on the backoff, until the wait ends. The attempt was
		// rolled back, so its waiter row may not exist yet.
		hasWaiter = hasWaiter || !busy
		if mayGrant = res.grantable; mayGrant {
			continue // ask for it now
		}
		if v.byWaiter {
			m.st.hub().wakeNext(lockID, t)
		}
		timer := time.NewTimer(bo.next())
		select {
		case <-t.ch:
		case <-timer.C:
		case <-actx.Done():
		}
		timer.Stop()
		if actx.Err() != nil {
			m.st.hub().leave(lockID, t, false)
			m.tidy(lockID, "", q.waiterID, true)
			if ctx.Err() != nil {
				return fail(context.Cause(ctx))
			}
			return fail(ErrTimeout)
		}
	}
}

// tidy removes what a failed or abandoned acquire may have left: its grant
// (if the commit happened as the call failed) and its waiter row. It runs
// after the store call returned, when the request can no longer commit
// (see store.acquire).
func (m *Manager) tidy(lockID, token, waiterID string, hasWaiter bool) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if token != "" {
		_, _ = m.st.release(ctx, lockID, token)
	}
	if hasWaiter {
		if err := m.st.dropWaiter(ctx, lockID, waiterID); err != nil {
			m.opts.Logger.Warn("lease: removing a waiter row failed; it expires on its own", "lock_id", lockID, "err", err)
		}
	}
}

func (m *Manager) newLock(parent context.Context, e *lockcore.Entry, r Resource, token, owner string, slot *JobSlot, mode Mode, res *applied, sent time.Time) *Lock {
	l := &Lock{m: m, res: r, token: token, owner: owner, slot: slot, mode: mode, fence: res.fence,
		grantedAt: res.grantedAt, done: make(chan struct{})}
	e.Hold = l
	l.entry = e
	l.ctx, l.cancel = context.WithCancelCause(lockcore.Push(parent, e))
	l.deadline = lockcore.LocalDeadline(sent, m.opts.Lease)
	m.track(l, l.deadline)
	if slot != nil {
		slot.adopt(l)
	}
	return l
}

// expire runs when the local deadline may have passed (the Manager's
// expiry timer, or Err): the lease ran out with no heartbeat renewing it.
// It reports the deadline when it has not passed (a renewal moved it as
// the timer fired), and zero once the lock has ended.
func (l *Lock) expire() time.Time {
	l.mu.Lock()
	deadline, ended := l.deadline, l.err != nil
	l.mu.Unlock()
	if ended {
		return time.Time{}
	}
	if time.Now().Before(deadline) {
		return deadline
	}
	l.lose("its lease ran out before a heartbeat renewed it")
	return time.Time{}
}

// extend moves the local deadline after a heartbeat renewed the lease.
func (l *Lock) extend(deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || !deadline.After(l.deadline) {
		return
	}
	// Later only: the expiry timer, armed no later than the old deadline,
	// finds the new one when it fires.
	l.deadline = deadline
}

// lose marks the lock lost: its context is cancelled with ErrLost as the
// cause and Done closes. Heartbeats stop; the row, if still there, is left
// for Release (or, if Release never comes, for stale recovery).
func (l *Lock) lose(why string) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = fmt.Errorf("%w: %s %s (fence %d): %s", ErrLost, l.res, l.mode, l.fence, why)
	err := l.err
	l.mu.Unlock()
	l.m.untrack(l)
	l.cancel(err)
	close(l.done)
}

// Release frees the lock, even if ctx has ended. If the lock was taken over
// (its row is gone) it touches nothing and returns an error wrapping
// ErrLost. A lock whose lease ran out but that nobody took over is simply
// freed. On a database error the lock counts as released all the same: its
// heartbeats stop and its lease runs out.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	wasLost := l.err != nil
	if !wasLost {
		l.err = ErrReleased
	}
	mode, fence := l.mode, l.fence
	l.mu.Unlock()
	l.m.untrack(l)
	if l.slot != nil {
		l.slot.disown(l)
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
	}
	found, err := l.m.st.release(ctx, l.res.String(), l.token)
	if !wasLost {
		l.cancel(ErrReleased)
		close(l.done)
	}
	switch {
	case err != nil:
		return &Error{Op: "release", Resource: l.res, Mode: mode, Err: err}
	case !found:
		return &Error{Op: "release", Resource: l.res, Mode: mode,
			Err: fmt.Errorf("%w: fence %d was taken over or removed before the release", ErrLost, fence)}
	}
	return nil
}

// Upgrade turns an Upgradeable lock into a Write lock, in one transaction,
// once no reader remains; it waits up to Options.Wait (ErrTimeout: the lock
// stays Upgradeable). While it waits, new readers are held back. The
// upgrade mints a new fence. Any other mode: ErrNotUpgradeable.
func (l *Lock) Upgrade(ctx context.Context) error {
	m := l.m
	start := time.Now()
	fail := func(err error) error {
		return &Error{Op: "upgrade", Resource: l.res, Mode: Upgradeable, Waited: time.Since(start), Err: err}
	}
	l.mu.Lock()
	mode, lerr := l.mode, l.err
	l.mu.Unlock()
	if lerr != nil {
		return fail(lerr)
	}
	if mode != Upgradeable {
		return fail(ErrNotUpgradeable)
	}
	lockID := l.res.String()
	q := request{mode: Write, upgrade: true, token: l.token, waiterID: newToken(), grace: m.opts.Grace}
	t := m.st.hub().join(lockID, true)
	actx, cancel := context.WithTimeout(ctx, m.opts.Wait)
	defer cancel()
	hasWaiter := false
	bo := newBackoff(m.opts)
	for {
		sent := time.Now()
		var v verdict
		res, err := m.st.attempt(actx, lockID, func(s *state) (*change, error) {
			v = decide(s, q)
			ch := &change{purge: deadWaiters(s)}
			switch {
			case v.lost:
				return ch, nil
			case v.grant:
				ch.victims, ch.actor, ch.reason = v.victims, l.owner, "lease expired"
				ch.grant = &grantRow{token: l.token, owner: l.owner, mode: Write, upgrade: true, lease: m.opts.Lease, grace: m.opts.Grace}
				if hasWaiter {
					ch.dropWaiter = q.waiterID
				}
			default:
				ch.waiter = &waiterRow{id: q.waiterID, owner: l.owner, mode: Write, ttl: m.opts.waiterTTL()}
			}
			return ch, nil
		})
		if errors.Is(err, errRetry) {
			continue
		}
		if err == nil && v.lost {
			err = fmt.Errorf("%w: its row is gone", ErrLost)
			l.lose("an upgrade found its row gone (taken over or removed)")
		}
		if err == nil && res.granted {
			m.st.hub().leave(lockID, t, false)
			l.mu.Lock()
			l.mode, l.fence = Write, res.fence
			l.mu.Unlock()
			l.extend(lockcore.LocalDeadline(sent, m.opts.Lease))
			return nil
		}
		if err == nil {
			hasWaiter = true
			timer := time.NewTimer(bo.next())
			select {
			case <-t.ch:
			case <-timer.C:
			case <-actx.Done():
			}
			timer.Stop()
			if actx.Err() == nil {
				continue
			}
		}
		m.st.hub().leave(lockID, t, false)
		m.tidy(lockID, "", q.waiterID, hasWaiter || err != nil)
		switch {
		case err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			return fail(err)
		case ctx.Err() != nil:
			return fail(context.Cause(ctx))
		default:
			return fail(ErrTimeout)
		}
	}
}

// SetMetadata replaces the lock's metadata column (seed 004 §3.2's
// caller-defined context), shown by Locks and monitors. A lock taken over
// meanwhile: an error wrapping ErrLost.
func (l *Lock) SetMetadata(ctx context.Context, md map[string]any) error {
	fail := func(err error) error { return &Error{Op: "set metadata", Resource: l.res, Mode: l.Mode(), Err: err} }
	if err := l.Err(); err != nil {
		return fail(err)
	}
	if md == nil {
		md = map[string]any{}
	}
	b, err := json.Marshal(md)
	if err != nil {
		return fail(err)
	}
	ok, err := l.m.st.setMetadata(ctx, l.token, b)
	if err != nil {
		return fail(err)
	}
	if !ok {
		return fail(fmt.Errorf("%w: its row is gone", ErrLost))
	}
	return nil
}
