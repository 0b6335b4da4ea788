package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// queue for the lock instead of failing each other. Concurrent calls share
// one probe. Cancelling ctx makes this call return at once with ctx's error
// wrapped; the shared probe itself still ends within ProbeTimeout and
// releases everything it took, as lockcore guarantees.
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
	key := lockcore.HealthProbeKey()
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
			return m.probeFailed(err, 0)
		}
		if err := m.pool.Ping(ctx); err != nil {
			return m.probeFailed(err, 0)
		}
	}
	// pid is the backend the acquire ran on; 0 means no connection was had.
	var pid uint32
	svc := lockcore.New(m.pool,
		lockcore.WithDefaultTimeout(ProbeTimeout),
		lockcore.WithApplicationName(""), // keep the monitor's own name
		lockcore.WithObserver(func(e lockcore.Event) {
			if e.PID != 0 {
				pid = e.PID
			}
		}))
	err := svc.With(ctx, key, func(context.Context) error { return nil })
	took := time.Since(start)
	switch {
	case err == nil && took > ProbeTimeout:
		return &ProbeError{Reason: fmt.Sprintf("probe lock %s took %s to take and release, over %s", key, took.Round(time.Millisecond), ProbeTimeout)}
	case err == nil:
		return nil
	}
	return m.probeFailed(err, pid)
}

// probeFailed says why a probe failed; pid is the backend the lock was
// asked on, 0 if none.
func (m *Monitor) probeFailed(err error, pid uint32) error {
	key := lockcore.HealthProbeKey()
	switch {
	case errors.Is(err, lockcore.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		if pid != 0 {
			return &ProbeError{Reason: fmt.Sprintf("probe lock %s not granted within %s (held elsewhere?)", key, ProbeTimeout), Err: err}
		}
		if st := m.pool.Stat(); st.AcquiredConns() >= st.MaxConns() {
			return &ProbeError{Reason: fmt.Sprintf("no free monitor connection within %s (all %d in use)", ProbeTimeout, st.MaxConns()), Err: err}
		}
		return &ProbeError{Reason: fmt.Sprintf("database did not answer within %s", ProbeTimeout), Err: err}
	}
	var ce *ConnectError
	if errors.As(Describe(err), &ce) {
		if ce.Kind == KindOther {
			return &ProbeError{Reason: "health probe failed: " + ce.Error(), Err: err}
		}
		return &ProbeError{Reason: "database unusable: " + ce.Error(), Err: err}
	}
	return &ProbeError{Reason: "health probe failed: " + oneLine(err.Error()), Err: err}
}
