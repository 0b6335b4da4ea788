// Watching the server while running: config drift, a server gone, leaks at the end.

package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// checkConfig checks the config file every configCheckEvery until ctx
// ends, so a lost key shows while the run goes on.
func (s *Sim) checkConfig(ctx context.Context) {
	for workers.Pause(ctx, configCheckEvery) == nil {
		if err := s.env.AuditConfig(); err != nil {
			s.log.Warn("config check", "err", err)
		}
	}
}

// watchServer declares the server gone (Run then stops) once the live
// session has been down for longer than the lock timeout: a restart is
// ridden out, the pools and the live session reconnect, but a server that
// does not come back ends the run rather than have it count errors until
// its duration ends.
func (s *Sim) watchServer(ctx context.Context) {
	for workers.Pause(ctx, watchEvery) == nil {
		lt := s.env.LockTimeout()
		down := s.env.LiveDown()
		if down > 0 {
			// The errors of a restart ridden out are the restart's, not the
			// run's (ErrorStats.InFaults).
			s.rec.errs.fault(watchEvery)
		}
		if down > lt {
			s.goneOnce.Do(func() {
				s.goneErr = fmt.Errorf("%w within %s (the lock timeout)", ErrServerGone, lt)
				s.log.Warn("server gone", "down", down.Round(time.Millisecond), "lock_timeout", lt)
				close(s.gone)
			})
			return
		}
	}
}

// isGone reports whether the server was declared gone.
func (s *Sim) isGone() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

// checkLeaks reports locks still held and connections still checked out,
// by this process (other simulators on the database may be running).
func (s *Sim) checkLeaks(ctx context.Context) error {
	if n := s.locks.Held(); n != 0 {
		s.rec.Violation(workers.InvNoLeaks, "held", fmt.Sprintf("lockcore reports %d lock(s) still held", n))
	}
	for _, p := range s.settledPools(ctx) {
		if p.InUse != 0 || p.Waiting != 0 {
			s.rec.Violation(workers.InvNoLeaks, "pool:"+p.Name,
				fmt.Sprintf("%s pool: %d connection(s) checked out, %d waiting after the run", p.Name, p.InUse, p.Waiting))
		}
	}
	var errs []error
	for _, p := range slices.Compact([]*pgxpool.Pool{s.lockPool, s.workPool}) {
		for _, c := range p.AcquireAllIdle(ctx) {
			var n int64
			err := c.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").Scan(&n)
			pid := c.Conn().PgConn().PID()
			dead := c.Conn().IsClosed() // its session is gone (terminated, or the server restarted), and its locks with it
			c.Release()
			if err != nil && !dead {
				errs = append(errs, fmt.Errorf("leak check: %w", err))
				continue
			}
			if n > 0 {
				s.rec.Violation(workers.InvNoLeaks, fmt.Sprintf("backend:%d", pid),
					fmt.Sprintf("idle pooled connection (pid %d) still holds %d advisory lock(s)", pid, n))
			}
		}
	}
	return errors.Join(errs...)
}

// settledPools returns the pools once none has a connection checked out or
// a caller waiting, or as they are after poolsSettle.
func (s *Sim) settledPools(ctx context.Context) []model.PoolStats {
	deadline := time.Now().Add(poolsSettle)
	for {
		ps := s.pools()
		busy := slices.ContainsFunc(ps, func(p model.PoolStats) bool { return p.InUse != 0 || p.Waiting != 0 })
		if !busy || time.Now().After(deadline) {
			return ps
		}
		if settleWait != nil {
			settleWait()
		}
		if workers.Pause(ctx, 10*time.Millisecond) != nil {
			return s.pools()
		}
	}
}
