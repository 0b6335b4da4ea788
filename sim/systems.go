package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/connect"
	"github.com/locktop/locktop/internal/testenv/scratch"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/workers"
)

// System is one of the lock systems a scenario runs; a scenario may run
// several at once.
type System int

// The systems.
const (
	// SystemAgents is seed 001's agents: hooks, background workers and
	// services under PostgreSQL advisory locks (lockcore).
	SystemAgents System = 1 << iota
	// SystemTurns is seed 002's conversation turns under the Redis session
	// mutex (lockcore/redislock).
	SystemTurns
	// SystemJobs is seed 004's map, sketch and project jobs under lease
	// locks (lockcore/lease).
	SystemJobs
	// SystemDeadlocks makes cycles of waits across kinds on purpose
	// (advisory and Redis, advisory and lease, Redis and lease), each
	// broken only by a timeout, for the deadlock watch to report
	// (deadlock.go). It needs Redis and the lease store.
	SystemDeadlocks
)

// Application name of the lease store's pool (PostgreSQL).
const AppLease = "locktop.lease"

// Lease stores (Options.LeaseStore).
const (
	LeasePostgres = "postgres"
	LeaseSQLite   = "sqlite"
)

// ErrNoRedis means the scenario runs conversation turns and no Redis was
// given (Options.RedisURL).
var ErrNoRedis = errors.New("the scenario runs conversation turns on Redis: give a Redis (--redis URL or REDIS_URL)")

// Where says where a simulator's locks of each kind live, so a monitor
// can watch them: the advisory locks are in the simulator's database.
type Where struct {
	RedisURL    string // "" without conversation turns
	RedisPrefix string // the session locks' key prefix
	LeaseStore  string // LeasePostgres (the simulator's database) or LeaseSQLite
	LeaseSchema string // the PostgreSQL schema of the lease tables
	LeasePath   string // the SQLite file of the lease tables
}

// Where returns where the simulator's locks live.
func (s *Sim) Where() Where {
	w := Where{LeaseStore: s.opts.LeaseStore, LeaseSchema: s.opts.LeaseSchema, LeasePath: s.leasePath(), RedisPrefix: s.opts.RedisPrefix}
	if s.opts.RedisURL != "" {
		w.RedisURL = s.opts.RedisURL
	}
	return w
}

func (s *Sim) leasePath() string {
	if s.opts.LeaseStore != LeaseSQLite {
		return ""
	}
	if s.opts.LeasePath != "" {
		return s.opts.LeasePath
	}
	if s.sysDir == "" {
		return ""
	}
	return filepath.Join(s.sysDir, "leases.db")
}

// checkSystemOptions fills in and checks the options of seeds 002 and 004.
func checkSystemOptions(o *Options) error {
	o.RedisPrefix = cmp.Or(o.RedisPrefix, "sesslock:")
	o.LeaseStore = cmp.Or(o.LeaseStore, LeasePostgres)
	o.LeaseSchema = cmp.Or(o.LeaseSchema, lease.DefaultSchema)
	if o.LeaseStore != LeasePostgres && o.LeaseStore != LeaseSQLite {
		return fmt.Errorf("sim: lease store %q: use %q or %q", o.LeaseStore, LeasePostgres, LeaseSQLite)
	}
	if err := workers.ValidSchema(o.LeaseSchema); err != nil {
		return err
	}
	return nil
}

// scratchDir returns the directory of the simulator's maps (and SQLite
// lease file), made on first use and removed by Close.
func (s *Sim) scratchDir() (string, error) {
	if s.sysDir == "" {
		dir, err := scratch.New("", "locktop-sim-jobs-")
		if err != nil {
			return "", fmt.Errorf("sim: the jobs' directory: %w", err)
		}
		s.sysDir = dir
	}
	return s.sysDir, nil
}

// setUpSystems connects what sc's systems need, once: Redis and the pods
// for turns, the lease store and its nodes for jobs, and creates their
// conversations and resources. The drivers must be stopped.
func (s *Sim) setUpSystems(ctx context.Context, sc Scenario) error {
	if sc.Systems&SystemTurns != 0 {
		if s.turns == nil {
			if err := s.redisClient(ctx); err != nil {
				return err
			}
			s.turns = workers.NewTurns(s.env, s.rdb, workers.TurnOptions{
				Pods: 4, Prefix: s.opts.RedisPrefix, TTL: sc.TurnTTL, FailOpen: s.opts.FailOpen, Logger: s.log,
			})
			s.sessions = redislock.New(s.rdb, redislock.Options{
				Prefix: cmp.Or(s.opts.RedisPrefix, redislock.DefaultPrefix), Wait: 2 * time.Second, TTL: 5 * time.Second, Logger: s.log,
			})
		}
		if err := workers.EnsureConversations(ctx, s.db, sc.Conversations); err != nil {
			return fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		s.turns.SetTiming(sc.TurnTiming)
	}
	if sc.Systems&SystemJobs != 0 {
		if s.jobs == nil {
			j, err := s.openJobs(ctx)
			if err != nil {
				return err
			}
			s.jobs = j
		}
		s.jobs.SetTiming(sc.JobTiming)
	}
	if sc.Systems&SystemDeadlocks != 0 && s.dead == nil {
		if err := s.redisClient(ctx); err != nil {
			return err
		}
		d, err := s.openDeadlocks(ctx)
		if err != nil {
			return err
		}
		s.dead = d
	}
	return nil
}

// openJobs opens the lease store and the job system.
func (s *Sim) openJobs(ctx context.Context) (*workers.Jobs, error) {
	dir, err := s.scratchDir()
	if err != nil {
		return nil, err
	}
	open, err := s.leaseOpener(ctx)
	if err != nil {
		return nil, err
	}
	j, err := workers.NewJobs(ctx, s.env, workers.JobOptions{Open: open, Dir: dir, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	return j, nil
}

// leaseOpener returns how to open a lease Manager on the lease store,
// making the store's pool (PostgreSQL) on first use.
func (s *Sim) leaseOpener(ctx context.Context) (func(ctx context.Context, o lease.Options) (*lease.Manager, error), error) {
	if _, err := s.scratchDir(); err != nil {
		return nil, err
	}
	if s.opts.LeaseStore == LeaseSQLite {
		path := s.leasePath()
		return func(ctx context.Context, o lease.Options) (*lease.Manager, error) {
			return lease.OpenSQLite(ctx, path, o)
		}, nil
	}
	if s.leasePool == nil {
		cfg, err := connect.PoolConfig(s.opts.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		cfg.MinConns, cfg.MaxConns = 0, 24
		cfg.ConnConfig.RuntimeParams["application_name"] = AppLease
		if poolConfig != nil {
			poolConfig(cfg)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		s.leasePool = pool
	}
	pool, schema := s.leasePool, s.opts.LeaseSchema
	return func(ctx context.Context, o lease.Options) (*lease.Manager, error) {
		o.Schema = schema
		return lease.OpenPostgres(ctx, pool, o)
	}, nil
}

// redisClient connects the simulator's Redis client, once.
func (s *Sim) redisClient(ctx context.Context) error {
	if s.rdb != nil {
		return nil
	}
	if s.opts.RedisURL == "" {
		return fmt.Errorf("%w: %w", ErrUnusable, ErrNoRedis)
	}
	pctx, cancel := context.WithTimeout(ctx, connect.DefaultTimeout)
	defer cancel()
	rdb, err := connect.Redis(pctx, s.opts.RedisURL, connect.RedisTuning{ClientName: "locktop.sim", PoolSize: 64})
	if err == nil {
		err = rdb.Ping(pctx).Err()
		if err != nil {
			_ = rdb.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("%w: redis: %w", ErrUnusable, err)
	}
	s.rdb = rdb
	return nil
}

// auditSystems runs the final checks of the turns and jobs that ran.
func (s *Sim) auditSystems(ctx context.Context, sys System) error {
	var errs []error
	if sys&SystemTurns != 0 && s.turns != nil {
		errs = append(errs, s.turns.Audit(ctx))
	}
	if sys&SystemJobs != 0 && s.jobs != nil {
		errs = append(errs, s.jobs.Audit(ctx))
	}
	return errors.Join(errs...)
}

// closeSystems closes the pods, the lease nodes, Redis and the lease pool,
// and removes the jobs' directory.
func (s *Sim) closeSystems() {
	s.dead.close()
	if s.turns != nil {
		s.turns.Close()
	}
	if s.sessions != nil {
		_ = s.sessions.Close()
	}
	if s.jobs != nil {
		s.jobs.Close()
	}
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.leasePool != nil {
		done := make(chan struct{})
		go func() { s.leasePool.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeWait):
		}
	}
	if s.sysDir != "" {
		if err := os.RemoveAll(s.sysDir); err != nil {
			s.log.Warn("removing the jobs' directory", "err", err)
		}
	}
}
