package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenPostgres returns a Manager whose locks live in PostgreSQL, in
// opts.Schema (default "locktop_lease"), creating the schema and its tables
// if they are missing. Release wake-ups travel by LISTEN/NOTIFY on a
// connection of the Manager's own, opened with pool's configuration (so
// the pool needs no spare connection for it); an acquire abandoned with a
// request in flight opens another such connection for a few round trips,
// to end that request's backend. Both are made from
// pool.Config().ConnConfig: the pool's BeforeConnect and AfterConnect do
// not run for them. The pool stays the caller's: Close does not close it.
//
// Every statement on the lock path uses the server's clock (now()), never
// the client's. Like any session feature, LISTEN needs a real session: do
// not point the pool at PgBouncer in transaction pooling mode.
func OpenPostgres(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Manager, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("lease: OpenPostgres needs a pool")
	}
	p := &pgStore{pool: pool, schema: opts.Schema, channel: opts.Schema, h: newHub(), log: opts.Logger, sql: map[string]string{}}
	for _, s := range pgStatements {
		p.sql[s] = inSchema(opts.Schema, s)
	}
	if err := createPostgres(ctx, pool, opts.Schema); err != nil {
		return nil, err
	}
	// The database's oid too: a clone (CREATE DATABASE ... TEMPLATE)
	// copies the id with the tables, and is other tables.
	if err := pool.QueryRow(ctx, inSchema(opts.Schema, `SELECT s.id || '/' || d.oid
		FROM {s}.dal_store s, pg_database d WHERE d.datname = current_database()`)).Scan(&p.ident); err != nil {
		return nil, fmt.Errorf("lease: naming the tables: %w", err)
	}
	p.ident = "postgres:" + p.ident + "/" + opts.Schema
	if err := p.listen(ctx); err != nil {
		return nil, err
	}
	return newManager(p, opts), nil
}

var pgStatements = []string{
	pgEnsureResource, pgLockResource, pgState, pgBumpResource, pgFastGrant, pgWaitIfRefused, pgUnwaitIfGranted, pgPurgeDead, pgGrant, pgUpgrade, pgVictim, pgUpsertWaiter,
	pgDeleteWaiter, pgPurgeWaiters, pgShareRow, pgRelease, pgWakeIfWait, pgDropWaiter, pgRenewLocks, pgRenewJobs, pgSetMetadata,
	pgEnqueue, pgJobGate, pgJobs, pgTurns, pgSetTurn, pgDropJobs, pgStartJobs, pgJobState, pgFinish, pgCommitManifest, pgManifest, pgHoldsWrite,
	pgListAudit,
}

// createPostgres creates the schema and tables unless they exist. Two
// processes creating them at once can collide in the catalogs; the loser
// tries again.
func createPostgres(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	for try := 0; ; try++ {
		var exists bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+"."+pgLastTable).Scan(&exists); err != nil {
			return fmt.Errorf("lease: checking schema %s: %w", schema, err)
		}
		if exists {
			return nil
		}
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			// Durable before OpenPostgres returns, as a grant is: on a
			// server that commits asynchronously a crash took the tables
			// back, and every call of the Manager failed (42P01) until it
			// was opened again (TestAttackCrashDeadIdleConnections).
			if _, err := tx.Exec(ctx, "SELECT "+pgDurable); err != nil {
				return err
			}
			for _, ddl := range pgDDL {
				if _, err := tx.Exec(ctx, inSchema(schema, ddl)); err != nil {
					return err
				}
			}
			return nil
		})
		var pe *pgconn.PgError
		if err != nil && try < 5 && errors.As(err, &pe) &&
			(pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42P06" || pe.Code == "42710") {
			continue
		}
		if err != nil {
			return fmt.Errorf("lease: creating schema %s: %w", schema, err)
		}
		return nil
	}
}

// pgStore keeps the tables in PostgreSQL.
type pgStore struct {
	pool    *pgxpool.Pool
	schema  string
	channel string // NOTIFY channel: the schema's name
	ident   string // the id in the tables' dal_store and the schema: where
	sql     map[string]string
	h       *hub
	log     *slog.Logger

	stop context.CancelFunc
	wg   sync.WaitGroup
}

func (p *pgStore) q(s string) string { return p.sql[s] }

func (p *pgStore) hub() *hub { return p.h }

func (p *pgStore) where() string { return p.ident }

func (p *pgStore) close() error {
	if p.stop != nil {
		p.stop()
		p.wg.Wait()
	}
	return nil
}

// connConfig configures a connection of the store's own, outside the
// pool, named app (its application_name).
func (p *pgStore) connConfig(app string) *pgx.ConnConfig {
	cfg := p.pool.Config().ConnConfig.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = app
	return cfg
}

// listen starts the goroutine that turns notifications into wake-ups. The
// first connection is made here, so a Manager that opens is listening.
func (p *pgStore) listen(ctx context.Context) error {
	cfg := p.connConfig("locktop.lease.listen")
	connect := func(ctx context.Context) (*pgx.Conn, error) {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		if _, err := c.Exec(ctx, "LISTEN "+p.channel); err != nil {
			c.Close(ctx)
			return nil, err
		}
		return c, nil
	}
	first, err := connect(ctx)
	if err != nil {
		return fmt.Errorf("lease: opening the listener connection: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c := first
		wait := 50 * time.Millisecond
		for {
			if c != nil {
				for {
					n, err := c.WaitForNotification(lctx)
					if err != nil {
						break
					}
					if n.Payload == jobsKey {
						p.h.wakeAll(jobsKey)
					} else {
						p.h.wakeNotified(n.Payload)
					}
				}
				cctx, cancel := context.WithTimeout(context.Background(), time.Second)
				c.Close(cctx)
				cancel()
				c = nil
			}
			if lctx.Err() != nil {
				return
			}
			p.log.Warn("lease: listener connection lost; waiters poll until it is back")
			select {
			case <-lctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
			if nc, err := connect(lctx); err == nil {
				c, wait = nc, 50*time.Millisecond
				p.h.wakeEveryone() // notifications may have been missed meanwhile
			}
		}
	}()
	return nil
}

// acquire is one round trip in the common cases: the resource's row (taken,
// with the fence to grant), its state, the grant unless something
// conflicts and the waiter row, pipelined in one implicit transaction (a
// batch ends in a single Sync). Only when the state shows a conflicting
// holder that may be stale does it go on to attempt, which decides in Go.
func (p *pgStore) acquire(ctx context.Context, lockID string, f *fastAcquire, plan func(*state) (*change, error)) (*applied, error) {
	for n := 0; ; n++ {
		a, err := p.acquireOnce(ctx, lockID, f, plan)
		if !p.resend(ctx, err, n) {
			return a, retryable(err)
		}
	}
}

func (p *pgStore) attempt(ctx context.Context, lockID string, plan func(*state) (*change, error)) (*applied, error) {
	for n := 0; ; n++ {
		a, err := p.attemptOnce(ctx, lockID, plan)
		if !p.resend(ctx, err, n) {
			return a, retryable(err)
		}
	}
}

// resend reports whether a request that failed with err, for the nth time,
// goes again on another connection: when its transaction cannot have
// committed because its session had ended before it ran (a pooled
// connection that died while idle: a server crash or restart, a
// terminated backend), which is not the caller's failure. pgx either sent
// none of it (pgconn.SafeToRetry) or read the server's farewell (a FATAL
// of class 57, operator intervention) in its place; not one read after
// the request's commit may have happened (commitUnknownError). A dead connection
// leaves the pool as it fails, so as many tries as the pool has
// connections reach a live one.
func (p *pgStore) resend(ctx context.Context, err error, n int) bool {
	if err == nil || ctx.Err() != nil || n >= int(p.pool.Config().MaxConns) {
		return false
	}
	var pe *pgconn.PgError
	var cu commitUnknownError
	if errors.As(err, &cu) {
		return false
	}
	return pgconn.SafeToRetry(err) || errors.As(err, &pe) && pe.Severity == "FATAL" && strings.HasPrefix(pe.Code, "57")
}

// retryable marks errRetry the errors with which PostgreSQL aborted a
// transaction that may simply be run again: a serialization failure (under
// a default_transaction_isolation of repeatable read or serializable) or a
// deadlock.
func retryable(err error) error {
	if abortedRetryable(err) {
		return fmt.Errorf("%w: %w", errRetry, err)
	}
	return err
}

func abortedRetryable(err error) bool {
	if err == nil { // the common case, without the allocation errors.As makes
		return false
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

func (p *pgStore) acquireOnce(ctx context.Context, lockID string, f *fastAcquire, plan func(*state) (*change, error)) (*applied, error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, notSentError{err}
	}
	g := f.grant
	b := &pgx.Batch{}
	b.Queue(p.q(pgBumpResource), lockID)
	b.Queue(p.q(pgState), lockID)
	waiterID := ""
	if f.waiter != nil {
		waiterID = f.waiter.id
	}
	if !f.probe {
		b.Queue(p.q(pgFastGrant), lockID, g.token, g.mode.String(), g.owner, g.lease.Microseconds(), g.grace.Milliseconds(),
			f.conflicting, f.precedence, waiterID)
	}
	if w := f.waiter; w != nil {
		if f.hasWaiter {
			if !f.probe { // a probe grants nothing
				b.Queue(p.q(pgUnwaitIfGranted), w.id, g.token)
			}
			b.Queue(p.q(pgPurgeDead), lockID)
		}
		b.Queue(p.q(pgWaitIfRefused), w.id, lockID, w.mode.String(), w.owner, w.ttl.Microseconds(), g.token)
	}
	st := &state{}
	res := &applied{}
	br := conn.SendBatch(ctx, b)
	err = br.QueryRow().Scan(&st.fence, &st.now)
	if err == nil {
		err = readState(br, st)
	}
	if err == nil && !f.probe {
		err = br.QueryRow().Scan(&res.fence, &res.leaseExpires, &res.grantedAt, nil)
		res.granted = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
	}
	if cerr := br.Close(); err == nil {
		// Every answer read came: a FATAL now may have come after the
		// batch's commit.
		err = mayHaveCommitted(cerr)
	}
	p.putBack(conn, err)
	if err != nil || res.granted {
		return res, err
	}
	ch, err := plan(st)
	if err != nil {
		return nil, err
	}
	switch {
	case ch.grant != nil && f.probe && len(ch.victims) == 0:
		res.grantable = true
	case ch.grant != nil: // a stale holder in the way: take it over, deciding afresh
		// The attempt commits only what this process decided on the state
		// it read: a process that died meanwhile commits nothing.
		return p.attempt(ctx, lockID, plan)
	}
	return res, nil
}

// attempt is two round trips: BEGIN, the resource's row lock and its state
// in one pipelined batch; then the writes and COMMIT in another.
func (p *pgStore) attemptOnce(ctx context.Context, lockID string, plan func(*state) (*change, error)) (_ *applied, err error) {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// A connection left inside a transaction (an error half-way) is
	// destroyed by Release, which aborts the transaction on the server;
	// one whose request was abandoned is settled first (putBack).
	defer func() { p.putBack(conn, err) }()

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(p.q(pgEnsureResource), lockID)
	b.Queue(p.q(pgLockResource), lockID)
	b.Queue(p.q(pgState), lockID)
	st := &state{}
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec() // BEGIN
	if err == nil {
		_, err = br.Exec() // the resource's row
	}
	if err == nil {
		err = br.QueryRow().Scan(&st.fence, &st.now)
	}
	if err == nil {
		err = readState(br, st)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	ch, err := plan(st)
	if err != nil || ch.empty() {
		if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil && err == nil {
			err = rerr
		}
		return &applied{}, err
	}

	b = &pgx.Batch{}
	for _, v := range ch.victims {
		fence := int64(0)
		if ch.grant != nil {
			fence = st.fence + 1
		}
		b.Queue(p.q(pgVictim), v.token, ch.actor, ch.reason, fence)
	}
	if g := ch.grant; g != nil {
		if g.upgrade {
			b.Queue(p.q(pgUpgrade), lockID, g.token, g.lease.Microseconds())
		} else {
			b.Queue(p.q(pgGrant), lockID, g.token, g.mode.String(), g.owner, g.lease.Microseconds(), g.grace.Milliseconds())
		}
	}
	if w := ch.waiter; w != nil {
		b.Queue(p.q(pgUpsertWaiter), w.id, lockID, w.mode.String(), w.owner, w.ttl.Microseconds())
	}
	if ch.dropWaiter != "" {
		b.Queue(p.q(pgDeleteWaiter), ch.dropWaiter)
	}
	if len(ch.purge) > 0 {
		b.Queue(p.q(pgPurgeWaiters), ch.purge)
	}
	if ch.wake {
		b.Queue(pgNotify, p.channel, lockID)
	}
	if len(ch.victims) == 0 {
		b.Queue("COMMIT")
	}
	br = conn.SendBatch(ctx, b)
	res := &applied{}
	for range ch.victims {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			return nil, err
		}
		if tag.RowsAffected() != 1 {
			br.Close()
			if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
				return nil, err
			}
			return nil, errRetry
		}
	}
	if ch.grant != nil {
		if err := br.QueryRow().Scan(&res.fence, &res.leaseExpires, &res.grantedAt, nil); err != nil {
			br.Close()
			return nil, err
		}
		res.granted = true
	}
	if err := br.Close(); err != nil {
		if len(ch.victims) == 0 { // the batch ended with its COMMIT
			err = mayHaveCommitted(err)
		}
		return nil, err
	}
	if len(ch.victims) > 0 {
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return nil, mayHaveCommitted(err)
		}
	}
	return res, nil
}

// readState reads the next result of br, a pgState, into st.
func readState(br pgx.BatchResults, st *state) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var kind, id, mode, owner string
		var fence int64
		var lease, beat time.Time
		var claimed bool
		if err := rows.Scan(&kind, &id, &mode, &owner, &fence, &lease, &beat, &claimed); err != nil {
			return err
		}
		m, err := parseMode(mode)
		if err != nil {
			return err
		}
		if kind == "h" {
			st.holders = append(st.holders, holder{token: id, mode: m, owner: owner, fence: fence,
				leaseExpires: lease, heartbeat: beat, jobActive: claimed})
		} else {
			st.waiters = append(st.waiters, waiter{id: id, mode: m, expires: lease})
		}
	}
	return rows.Err()
}

func (p *pgStore) release(ctx context.Context, lockID, token string) (bool, error) {
	for n := 0; ; n++ {
		found, err := p.releaseOnce(ctx, lockID, token)
		if p.resend(ctx, err, n) {
			continue
		}
		if !abortedRetryable(err) || ctx.Err() != nil {
			return found, err
		}
	}
}

func (p *pgStore) releaseOnce(ctx context.Context, lockID, token string) (bool, error) {
	b := &pgx.Batch{} // one implicit transaction
	b.Queue(p.q(pgShareRow), lockID)
	b.Queue(p.q(pgRelease), token)
	b.Queue(p.q(pgWakeIfWait), lockID, p.channel)
	br := p.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	var tag, woke pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if err == nil {
		woke, err = br.Exec() // a row if the NOTIFY was sent
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	found := err == nil && tag.RowsAffected() == 1
	if found {
		// This process's waiter need not wait for the NOTIFY; the NOTIFY, if
		// one was sent, is then an echo to drop.
		p.h.wakeLocal(lockID, woke.RowsAffected() > 0)
	}
	return found, err
}

func (p *pgStore) renew(ctx context.Context, lease time.Duration, tokens, jobs []string) (renewed, error) {
	r := renewed{tokens: map[string]bool{}, jobs: map[string]bool{}}
	b := &pgx.Batch{}
	b.Queue(p.q(pgRenewLocks), tokens, lease.Microseconds())
	b.Queue(p.q(pgRenewJobs), jobs, lease.Microseconds())
	br := p.pool.SendBatch(ctx, b)
	defer br.Close()
	for _, into := range []map[string]bool{r.tokens, r.jobs} {
		rows, err := br.Query()
		if err != nil {
			return r, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id, nil); err != nil { // nil: pgDurable's column
				rows.Close()
				return r, err
			}
			into[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return r, err
		}
	}
	return r, br.Close()
}

func (p *pgStore) setMetadata(ctx context.Context, token string, md []byte) (bool, error) {
	tag, err := p.pool.Exec(ctx, p.q(pgSetMetadata), token, string(md))
	return tag.RowsAffected() == 1, err
}

func (p *pgStore) dropWaiter(ctx context.Context, lockID, id string) error {
	_, err := p.pool.Exec(ctx, p.q(pgDropWaiter), id, p.channel)
	return err
}

// commitUnknownError is the end of a session (a FATAL) that came after a
// request's commit may have happened: it is never sent again (resend), as
// a FATAL read in place of a request's first answer is. PostgreSQL commits
// and then ends the session when a backend terminated while its commit
// waited for a synchronous standby ("the transaction has already committed
// locally"); a resent grant then found the first one in its way, and
// TryAcquire answered ErrLocked, held by itself, its grant left for nobody
// (bp10's TestAttackFatalAfterCommit). The failed acquire's clean-up
// removes what the commit wrote.
type commitUnknownError struct{ err error }

func (e commitUnknownError) Error() string     { return e.err.Error() }
func (e commitUnknownError) Unwrap() error     { return e.err }
func (e commitUnknownError) SafeToRetry() bool { return false }

// mayHaveCommitted marks err, a failure of a request that may have
// committed, as never to be sent again.
func mayHaveCommitted(err error) error {
	if err == nil {
		return nil
	}
	return commitUnknownError{err}
}
