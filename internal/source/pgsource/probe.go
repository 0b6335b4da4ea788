package pgsource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// probeKey is the health probe's lock.
var probeKey = lockcore.Int64(registry.HealthProbeID)

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
// (registry.HealthProbeID, registered as LOCKTOP_HEALTH) on the monitor's
// read-only connection, through lockcore, and returns nil when both happened
// within ProbeTimeout. Otherwise it returns a *ProbeError saying why: the server
// did not answer, no monitor connection was free, the lock was not granted
// in time, or the whole took too long.
//
// The acquire blocks (for at most the timeout) rather than tries, so two
// probes, from this process or another locktop watching the same database,
// queue for the lock instead of failing each other. The probe's Service is
// told the pool is shared (lockcore.SharedPool), so the connection's own
// settings stay as Connect made them, and fences nothing (lockcore.NoFencing:
// the connection is read-only). Concurrent calls share one probe. Cancelling ctx makes
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
			return m.probeFailed(err)
		}
		if err := m.pool.Ping(ctx); err != nil {
			return m.probeFailed(err)
		}
	}
	// lockcore does the rest by the lock contract: the connection wait counts
	// against the second, the server's lock_timeout ends the wait, a failed
	// acquire is unlocked unconditionally and its connection closed.
	if err := m.probeLocks.With(ctx, probeKey, func(context.Context) error { return nil }); err != nil {
		return m.probeFailed(err)
	}
	if took := time.Since(start); took > ProbeTimeout {
		return &ProbeError{Reason: fmt.Sprintf("probe lock %s took %s to take and release, over %s", probeKey, took.Round(time.Millisecond), ProbeTimeout)}
	}
	return nil
}

// probeFailed says why a probe failed.
func (m *Monitor) probeFailed(err error) error {
	key := probeKey
	var le *lockcore.AdvisoryLockError
	switch {
	case errors.Is(err, lockcore.ErrLost):
		return &ProbeError{Reason: fmt.Sprintf("probe lock %s taken but not released: %s", key, oneLine(err.Error())), Err: err}
	case errors.Is(err, lockcore.ErrTimeout):
		if st := m.pool.Stat(); st.AcquiredConns() >= st.MaxConns() && errors.As(err, &le) && le.Waited > 0 {
			return &ProbeError{Reason: fmt.Sprintf("no free monitor connection within %s (all %d in use)", ProbeTimeout, st.MaxConns()), Err: err}
		}
		return &ProbeError{Reason: fmt.Sprintf("probe lock %s not granted within %s (held elsewhere?)", key, ProbeTimeout), Err: err}
	case errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err):
		return &ProbeError{Reason: fmt.Sprintf("database did not answer within %s", ProbeTimeout), Err: err}
	}
	var ce *ConnectError
	if errors.As(Describe(err), &ce) && ce.Kind != KindOther {
		return &ProbeError{Reason: "database unusable: " + ce.Error(), Err: err}
	}
	return &ProbeError{Reason: "health probe failed: " + oneLine(err.Error()), Err: err}
}
