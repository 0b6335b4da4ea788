package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/internal/alarm"
)

// Manager takes lease locks and job slots on one database. It is safe for
// concurrent use. Open one with OpenPostgres or OpenSQLite; Close releases
// what it still holds.
type Manager struct {
	opts Options
	st   store

	stop context.CancelFunc // ends the background goroutines
	wg   sync.WaitGroup

	mu     sync.Mutex
	closed bool
	locks  map[string]*Lock    // held grants by token, renewed by the heartbeat
	jobs   map[string]*JobSlot // queued and running jobs by id, renewed too
	// expiry fires no later than the earliest local deadline of locks;
	// waits bounds the acquires' waits (expiry.go).
	expiry alarm.Alarm
	waits  alarm.Waits

	// paused stops heartbeats without stopping the Manager: tests use it to
	// stand for a process that froze.
	paused atomic.Bool
}

// cleanupTimeout bounds the statements that tidy up after a failure or run
// when the caller's context has already ended (release, waiter removal).
const cleanupTimeout = 5 * time.Second

func newManager(st store, opts Options) *Manager {
	ctx, stop := context.WithCancel(context.Background())
	m := &Manager{opts: opts, st: st, stop: stop, locks: map[string]*Lock{}, jobs: map[string]*JobSlot{}}
	m.expiry.Fire = m.expire
	if opts.Heartbeat > 0 {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.heartbeats(ctx)
		}()
	}
	return m
}

// Options returns the Manager's options, defaults filled in.
func (m *Manager) Options() Options { return m.opts }

// Close releases every lock and ends every job the Manager still holds,
// stops its heartbeats (and its PostgreSQL listener), and closes its SQLite
// file. It does not close a PostgreSQL pool, which is the caller's. After
// Close, acquires and listings return ErrClosed; Release and Finish of what
// Close released do nothing.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	locks := make([]*Lock, 0, len(m.locks))
	for _, l := range m.locks {
		locks = append(locks, l)
	}
	jobs := make([]*JobSlot, 0, len(m.jobs))
	for _, j := range m.jobs {
		jobs = append(jobs, j)
	}
	m.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	for _, j := range jobs {
		if err := j.Finish(ctx); err != nil && !errors.Is(err, ErrLost) {
			errs = append(errs, err)
		}
	}
	for _, l := range locks {
		if err := l.Release(ctx); err != nil && !errors.Is(err, ErrLost) {
			errs = append(errs, err)
		}
	}
	m.stop()
	m.wg.Wait()
	m.expiry.Stop() // not the waits: an acquire under way still needs its deadline
	errs = append(errs, m.st.close())
	return errors.Join(errs...)
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// heartbeats renews every held grant and job every Heartbeat, in one
// statement per table.
func (m *Manager) heartbeats(ctx context.Context) {
	t := time.NewTicker(m.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !m.paused.Load() {
				m.beat(ctx)
			}
		}
	}
}

// beat is one heartbeat. A grant or job the database no longer has (taken
// over, recovered, or its lease passed) is lost; one the beat could not
// reach (a database error) keeps its local deadline, which ends it if no
// later beat gets through in time.
func (m *Manager) beat(ctx context.Context) {
	m.mu.Lock()
	locks := make([]*Lock, 0, len(m.locks))
	tokens := make([]string, 0, len(m.locks))
	for tok, l := range m.locks {
		locks = append(locks, l)
		tokens = append(tokens, tok)
	}
	jobs := make([]*JobSlot, 0, len(m.jobs))
	ids := make([]string, 0, len(m.jobs))
	for id, j := range m.jobs {
		jobs = append(jobs, j)
		ids = append(ids, id)
	}
	m.mu.Unlock()
	if len(tokens) == 0 && len(ids) == 0 {
		return
	}
	sent := time.Now()
	// A slow beat (a busy database, SQLite writers queueing) is still
	// worth waiting for while the leases last; the ticker drops the ticks
	// it misses meanwhile.
	bctx, cancel := context.WithTimeout(ctx, m.opts.Lease/2)
	defer cancel()
	r, err := m.st.renew(bctx, m.opts.Lease, tokens, ids)
	if err != nil {
		if ctx.Err() == nil {
			m.opts.Logger.Warn("lease heartbeat failed", "err", err, "locks", len(tokens), "jobs", len(ids))
		}
		return
	}
	deadline := lockcore.LocalDeadline(sent, m.opts.Lease)
	for _, l := range locks {
		if r.tokens[l.token] {
			l.extend(deadline)
		} else {
			l.lose("a heartbeat found its row gone (taken over or removed)")
		}
	}
	for _, j := range jobs {
		if r.jobs[j.job.ID] {
			j.extend(deadline)
		} else {
			j.lose("a heartbeat found its row gone (its lease passed)")
		}
	}
}

// track adds a new lock, whose local deadline is deadline, to the locks
// the heartbeat renews and the expiry timer watches.
func (m *Manager) track(l *Lock, deadline time.Time) {
	m.mu.Lock()
	m.locks[l.token] = l
	m.mu.Unlock()
	m.expiry.Arm(deadline)
}

func (m *Manager) untrack(l *Lock) {
	m.mu.Lock()
	delete(m.locks, l.token)
	m.mu.Unlock()
}

// RecoverStale frees r of every stale holder: lease passed, heartbeat older
// than this Manager's Grace, no active job claiming the owner. Each removal
// is written to the audit table, with actor and reason, in the same
// transaction. It reports false, nil when no holder is stale. It is the
// explicit form of what Acquire does when it takes over a lapsed lease.
func (m *Manager) RecoverStale(ctx context.Context, r Resource, actor, reason string) (bool, error) {
	fail := func(err error) (bool, error) { return false, &Error{Op: "recover", Resource: r, Err: err} }
	if err := r.validate(); err != nil {
		return fail(err)
	}
	if m.isClosed() {
		return fail(ErrClosed)
	}
	if actor == "" {
		actor = m.opts.Owner
	}
	for range 10 {
		var n int
		_, err := m.st.attempt(ctx, r.String(), func(s *state) (*change, error) {
			v := staleHolders(s, m.opts.Grace)
			n = len(v)
			return &change{victims: v, actor: actor, reason: reason, wake: len(v) > 0, purge: deadWaiters(s)}, nil
		})
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		return n > 0, nil
	}
	return fail(errRetry)
}

// Audit returns the newest stale recoveries, newest first (at most 1,000).
func (m *Manager) Audit(ctx context.Context) ([]AuditRecord, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	recs, err := m.st.audit(ctx, 1000)
	return convert(recs, auditOf), err
}

// Locks returns every holder and waiter of every process sharing the
// database, by resource in the lock order, holders first, then waiters by
// arrival: what a monitor shows.
func (m *Manager) Locks(ctx context.Context) ([]Info, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	l, err := m.st.list(ctx)
	if err != nil {
		return nil, err
	}
	return convert(l.Entries, infoOf), nil
}

// Jobs returns every queued and running job of every process sharing the
// database, by arrival.
func (m *Manager) Jobs(ctx context.Context) ([]JobInfo, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	l, err := m.st.list(ctx)
	if err != nil {
		return nil, err
	}
	return convert(l.Jobs, jobInfoOf(l.Now)), nil
}

// convert maps f over in (nil stays nil).
func convert[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
