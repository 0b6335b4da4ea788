package monitor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/lockcore"
)

// ProbeTimeout is how long a health probe may take: seed 002's health check
// gives the probe lock one second.
const ProbeTimeout = time.Second

// ProbeError says why a health probe failed, in one line fit for a 503 body.
type ProbeError struct {
	Reason string
	Err    error
}

func (e *ProbeError) Error() string { return e.Reason }

func (e *ProbeError) Unwrap() error { return e.Err }

// Probe is seed 002's health check: it takes and releases the probe lock
// (lockcore.HealthProbeKey, registered as LOCKTOP_HEALTH) on the monitor's
// read-only connection and returns nil when both happened within
// ProbeTimeout. Otherwise it returns a *ProbeError saying why: the server
// did not answer, no monitor connection was free, the lock was not granted
// in time, or the whole took too long.
//
// The acquire blocks (for at most the timeout) rather than tries, so two
// probes, from this process or another locktop watching the same database,
// queue for the lock instead of failing each other. Its lock_timeout is
// local to the lock statement, so the connection's own settings stay as
// Connect made them. Concurrent calls share one probe. Cancelling ctx makes
// this call return at once with ctx's error wrapped; the shared probe still
// ends within ProbeTimeout, and a probe that fails closes its connection
// after an unconditional unlock, so nothing it took outlives it.
func (m *Monitor) Probe(ctx context.Context) error {
	ch := m.probes.DoChan("probe", func() (any, error) {
		// Detached from any one caller: a caller that goes away must not
		// fail the probe the others wait for.
		return nil, m.probe(context.WithoutCancel(ctx))
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return &ProbeError{Reason: "health probe abandoned: " + ctx.Err().Error(), Err: ctx.Err()}
	}
}

// The probe's statements. The lock's WHERE clause runs before its select
// list, so lock_timeout is set (local to the statement's implicit
// transaction) before the wait begins.
const (
	probeLockSQL   = "SELECT pg_advisory_lock($1::int8) WHERE set_config('lock_timeout', $2, true) IS NOT NULL"
	probeUnlockSQL = "SELECT pg_advisory_unlock($1::int8)"
)

// probeMargin is how long before the probe's deadline the server's
// lock_timeout ends the wait, so a lock held elsewhere ends as a clean
// lock_not_available rather than a cut connection.
const probeMargin = 100 * time.Millisecond

func (m *Monitor) probe(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	// A round trip first, so that a server that does not answer is told
	// apart from a probe lock held elsewhere. A pooled connection that died
	// while idle (a restart, a terminated backend) fails once and is
	// dropped; a second ping on a fresh connection says whether the server
	// is really gone.
	if err := m.pool.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return m.probeFailed(err, false)
		}
		if err := m.pool.Ping(ctx); err != nil {
			return m.probeFailed(err, false)
		}
	}
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return m.probeFailed(err, false)
	}
	deadline, _ := ctx.Deadline()
	wait := time.Until(deadline) - probeMargin
	if wait < time.Millisecond {
		conn.Release() // nothing sent: the connection is clean
		return m.probeFailed(context.DeadlineExceeded, false)
	}
	id := lockcore.HealthProbeID
	if _, err := conn.Exec(ctx, probeLockSQL, id, strconv.FormatInt(wait.Milliseconds(), 10)); err != nil {
		discard(conn, id)
		return m.probeFailed(err, true)
	}
	var was bool
	if err := conn.QueryRow(ctx, probeUnlockSQL, id).Scan(&was); err != nil || !was {
		discard(conn, id)
		if err == nil {
			err = errors.New("pg_advisory_unlock returned false")
		}
		return &ProbeError{Reason: fmt.Sprintf("probe lock %s taken but not released: %s", lockcore.HealthProbeKey(), oneLine(err.Error())), Err: err}
	}
	conn.Release()
	if took := time.Since(start); took > ProbeTimeout {
		return &ProbeError{Reason: fmt.Sprintf("probe lock %s took %s to take and release, over %s", lockcore.HealthProbeKey(), took.Round(time.Millisecond), ProbeTimeout)}
	}
	return nil
}

// discard unlocks the probe key unconditionally, because the server may
// have granted it just as the wait failed (PostgreSQL bug #17686), then
// closes the connection rather than returning it to the pool: its session
// ends, and anything it still held with it.
func discard(conn *pgxpool.Conn, id int64) {
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	defer cancel()
	if !conn.Conn().IsClosed() {
		_, _ = conn.Exec(ctx, probeUnlockSQL, id)
	}
	_ = conn.Conn().Close(ctx)
	conn.Release()
}

// probeFailed says why a probe failed; sent tells whether the lock
// statement had been sent.
func (m *Monitor) probeFailed(err error, sent bool) error {
	key := lockcore.HealthProbeKey()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: the server's lock_timeout fired
		return &ProbeError{Reason: fmt.Sprintf("probe lock %s not granted within %s (held elsewhere?)", key, ProbeTimeout), Err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		switch st := m.pool.Stat(); {
		case sent:
			return &ProbeError{Reason: fmt.Sprintf("no answer to the probe lock %s within %s", key, ProbeTimeout), Err: err}
		case st.AcquiredConns() >= st.MaxConns():
			return &ProbeError{Reason: fmt.Sprintf("no free monitor connection within %s (all %d in use)", ProbeTimeout, st.MaxConns()), Err: err}
		}
		return &ProbeError{Reason: fmt.Sprintf("database did not answer within %s", ProbeTimeout), Err: err}
	}
	var ce *ConnectError
	if errors.As(Describe(err), &ce) && ce.Kind != KindOther {
		return &ProbeError{Reason: "database unusable: " + ce.Error(), Err: err}
	}
	return &ProbeError{Reason: "health probe failed: " + oneLine(err.Error()), Err: err}
}
