package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultHealthMaxAge is how long /healthz reuses a probe's result when
// Deps.HealthMaxAge is zero: however many clients ask, the database sees at
// most one probe (three statements) per second.
const DefaultHealthMaxAge = time.Second

// healthCache runs the health check for /healthz: one check in flight,
// shared by every request that arrives meanwhile, and its result reused
// until it is maxAge old.
type healthCache struct {
	check  func(context.Context) error
	maxAge time.Duration // < 0: no reuse (every request checks)
	log    *slog.Logger  // a failed check is logged once, not per request
	flight singleflight.Group

	mu      sync.Mutex
	result  healthResult
	failing bool // the last check failed: log only the change
}

// healthResult is one check's outcome.
type healthResult struct {
	err  error
	took time.Duration
	at   time.Time // when the check finished; zero before the first
}

func newHealthCache(check func(context.Context) error, maxAge time.Duration, log *slog.Logger) *healthCache {
	if maxAge == 0 {
		maxAge = DefaultHealthMaxAge
	}
	return &healthCache{check: check, maxAge: maxAge, log: log}
}

// get returns a result no older than maxAge, checking if there is none.
// A caller whose ctx ends stops waiting; the shared check goes on and its
// result is kept for the others.
func (c *healthCache) get(ctx context.Context) (healthResult, error) {
	if r, ok := c.cached(); ok {
		return r, nil
	}
	ch := c.flight.DoChan("check", func() (any, error) {
		if r, ok := c.cached(); ok {
			return r, nil // another flight finished just before this one began
		}
		start := time.Now()
		// Detached from the first caller, as Latest's poll is; the check
		// bounds itself (Monitor.Probe: ProbeTimeout).
		err := c.check(context.WithoutCancel(ctx))
		r := healthResult{err: err, took: time.Since(start), at: time.Now()}
		c.mu.Lock()
		c.result = r
		was := c.failing
		c.failing = err != nil
		c.mu.Unlock()
		// Once when it goes down, once when it comes back: not every
		// second of an outage.
		switch {
		case err != nil && !was:
			c.log.Warn("health check failed", "reason", err.Error())
		case err == nil && was:
			c.log.Info("health check passes again")
		}
		return r, nil
	})
	select {
	case res := <-ch:
		return res.Val.(healthResult), nil
	case <-ctx.Done():
		return healthResult{}, ctx.Err()
	}
}

func (c *healthCache) cached() (healthResult, bool) {
	if c.maxAge < 0 {
		return healthResult{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.result
	return r, !r.at.IsZero() && time.Since(r.at) <= c.maxAge
}
