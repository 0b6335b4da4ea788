package lease

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// An abandoned request: pgx gives up on a request when its context ends
// (an Acquire's wait runs out, its caller cancels) or its connection
// fails, closes the connection and returns, while the server may still
// run what it received: the CancelRequest pgx sends is best effort (it
// does nothing to a backend that has not started the request yet, or has
// finished it), and the Terminate that follows is read only after the
// request. What the request commits after the caller cleaned up would
// stay: a grant nobody knows it holds (the resource is blocked until its
// lease and grace pass), a writer's waiter row that holds back new
// readers until it lapses. So a store call that abandoned a request ends
// the request's backend and waits for it to be gone before it returns:
// the cleanup that follows (Manager.tidy) then sees whatever the request
// committed, and nothing commits after it.
//
// A deadline checked by the server in the grant and waiter statements
// would also do, but it is a time on the client's clock that the server
// compares with its own: skew between the two moves the line either way.
// Ending the backend needs no clock.

// pgEndBackend asks the backend pid ($1) to end and reports it while it
// lives; no row once it has ended. It works on every supported server
// (pg_terminate_backend's waiting form, PostgreSQL 14's, would hold the
// caller in 100ms steps). backend_start ($2, NULL at first) pins the
// backend seen first, so a pid reused by a new backend after the old one
// ended is not ended too; the first poll runs within milliseconds of the
// abandonment, before the old backend has ended or just after, and a pid
// is reused only after the operating system has handed out all the others.
// pg_backend_pid: never the connection that asks.
const pgEndBackend = `SELECT pg_terminate_backend(pid), backend_start FROM pg_stat_activity
WHERE pid = $1 AND pid <> pg_backend_pid() AND backend_start IS NOT DISTINCT FROM coalesce($2, backend_start)`

// putBack returns conn to the pool after a request that ended with err.
// If pgx abandoned the request (the connection is closed, or still busy,
// and pgx cannot say nothing was sent), it first waits until the
// request's backend has ended (settle). pgxpool destroys such a
// connection rather than pool it (pgxpool.Conn.Release checks IsClosed
// and IsBusy); the backend is another matter.
func (p *pgStore) putBack(conn *pgxpool.Conn, err error) {
	pc := conn.Conn().PgConn()
	abandoned := err != nil && (pc.IsClosed() || pc.IsBusy()) && !pgconn.SafeToRetry(err) && !endedSession(err)
	pid := pc.PID()
	conn.Release()
	if abandoned {
		p.settle(pid)
	}
}

// endedSession reports a FATAL error from the server: the backend sends
// it as it exits, after rolling back what it had not committed.
func endedSession(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity == "FATAL"
}

// settle ends the backend pid of an abandoned request and waits until it
// is gone (see "An abandoned request"), polling pg_stat_activity, for up
// to cleanupTimeout. A backend that has committed is past its commit by
// the time it leaves pg_stat_activity; one that has not rolls back first.
//
// It asks on a connection of its own, outside the pool: the pool may have
// none to give until the abandoned request has ended. The abandoned
// connection keeps its place in the pool until its backend has closed it
// (pgx reads what the server still sends, pgxpool waits for that before
// it frees the place), and the backend reads pgx's Terminate only after
// the request; so in a pool of one connection, or one whose other
// connections wait behind the same request, asking through the pool
// waited for the very request it was to end. When the server refuses a
// connection more (max_connections, a role's connection limit), it asks
// through the pool after all.
//
// It needs the right to end the backend: a role may end the backends of
// roles it is a member of (its own: a pool that connects as one role
// needs nothing more), else it needs pg_signal_backend; a superuser's
// backend only a superuser may end. Without that right, or when the
// backend outlives the timeout or the server cannot be reached, it logs a
// warning and returns: the cleanup then runs at once, as it did before,
// and what the request commits after it stays until it lapses. Behind a
// pooler that hands out its own backend keys (PgBouncer), the pid is not
// the server's: the poll finds nothing and the cleanup runs at once too.
func (p *pgStore) settle(pid uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	} = p.pool
	if c, err := pgx.ConnectConfig(ctx, p.connConfig("locktop.lease.settle")); err == nil {
		defer c.Close(ctx)
		q = c
	}
	var started pgtype.Timestamptz
	pause := time.Millisecond
	for {
		err := q.QueryRow(ctx, pgEndBackend, int64(pid), started).Scan(nil, &started)
		if errors.Is(err, pgx.ErrNoRows) {
			return
		}
		if err != nil {
			p.log.Warn("lease: ending the backend of an abandoned request failed; what it commits after the cleanup stays until it lapses",
				"pid", pid, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			p.log.Warn("lease: the backend of an abandoned request outlived the cleanup's timeout; what it commits after the cleanup stays until it lapses",
				"pid", pid)
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}
