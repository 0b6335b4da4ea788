package sim

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/connect"
	"github.com/locktop/locktop/internal/poolstats"
	"github.com/locktop/locktop/internal/scratch"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// Application names of the simulator's connections, so a monitor can tell
// them apart.
const (
	AppLock   = lockcore.DefaultApplicationName // lock connections
	AppWork   = "locktop.work"                  // work connections
	AppShared = "locktop.shared"                // the single pool of --shared-pool
)

// Pool sizes: the seed's pool_size 15 and max_overflow 10 make a work pool
// of 15 to 25 connections. The lock pool is big enough for the largest
// scenario ("scale": 1,000 hook goroutines queue on 200 lock connections),
// whichever scenario runs first: a pool cannot grow later, and lock
// connections open only as they are needed.
const (
	DefaultWorkMinConns int32 = 15
	DefaultWorkMaxConns int32 = 25
	DefaultLockMaxConns int32 = 200
)

// configCheckEvery is how often a run checks the config file for lost keys
// (workers.Env.AuditConfig), so a lost key shows while it runs.
const configCheckEvery = time.Second

// poolsSettle bounds how long the leak check waits for the pools to settle:
// a connection that lockcore destroyed (after a timeout or a lost lock)
// counts as checked out until pgxpool's background goroutine has closed it,
// which takes longer on a loaded machine.
const poolsSettle = 5 * time.Second

// ErrUnusable means the database cannot be used: a bad DSN, an unreachable
// server, a refused login, or the schema cannot be created.
var ErrUnusable = errors.New("database unusable")

// ErrServerGone is Run's error when the server stayed out of reach (the
// live session down) for longer than the lock timeout: the run was stopped
// without its final checks.
var ErrServerGone = errors.New("the server did not come back")

// watchEvery is how often a run checks whether the server is still out of
// reach.
const watchEvery = 100 * time.Millisecond

// finishProbe bounds the check that the server answers before the final
// checks, so that a stop against a server that stopped answering is quick.
const finishProbe = 2 * time.Second

// closeWait bounds how long Close waits for the pools to close. Against a
// server that stopped answering, pgxpool waits up to a minute for the
// connections it is opening and 15 s for each cancelled one to be
// acknowledged; Close leaves them to finish in the background instead.
const closeWait = 3 * time.Second

// ErrUnknownScenario and ErrUnknownFault are returned for names the
// simulator does not know.
var (
	ErrUnknownScenario = errors.New("unknown scenario")
	ErrUnknownFault    = errors.New("unknown fault")
)

// Options configure a simulator. The zero value with a DSN runs "steady"
// with locks on, on a separate lock pool.
type Options struct {
	// DSN of the database; "" takes the libpq environment variables.
	DSN string
	// Scenario to start with; "" is "steady".
	Scenario string
	// Agents overrides the scenario's number of agents (0: the scenario's).
	Agents int
	// Goroutines overrides the number of hook goroutines, and of message
	// goroutines in acf (0: the scenario's).
	Goroutines int
	// HookRate overrides the hooks per second (acf: messages): 0 the
	// scenario's, < 0 no limit (each goroutine fires its next as soon as
	// one ends).
	HookRate float64
	// NoLocks runs with every lock off, so the races happen and the checks
	// catch them.
	NoLocks bool
	// SharedPool takes lock connections from the work pool, as the seed's
	// single pool does, so the exhaustion hazard can be shown.
	SharedPool bool
	// Work pool size (0: 15 and 25) and lock pool size (0: 200). In shared
	// mode the single pool has the work pool's size.
	WorkMinConns, WorkMaxConns, LockMaxConns int32
	// LockTimeout overrides the scenario's blocking acquire timeout.
	LockTimeout time.Duration
	// Schema is the PostgreSQL schema the simulator owns ("" is
	// "locktop_sim"); created if missing, never touching other tables.
	Schema string
	// Reset drops the schema first. Do not use it while another simulator
	// shares the schema.
	Reset bool
	// ConfigPath is the config editor's JSON file. "" is a file of this
	// simulator's own in a temporary directory, removed by Close: the
	// config editor's race is between its own editors. Simulators given
	// the same path share the file (flock works across processes): each
	// checks and prunes only the keys it saved, so the file stays small.
	ConfigPath string
	// Observers see every lock event (the dashboard's metrics attach here).
	Observers []lockcore.Observer
	// Logger receives warnings (worker errors, invariant violations, lost
	// locks); nil discards them.
	Logger *slog.Logger
	// EventBuffer is the capacity of the Events channel (0: 1024).
	EventBuffer int
	// StopGrace is how long Stop lets running work finish before cancelling
	// it (0: 5s).
	StopGrace time.Duration
	// Hooks stop workloads at named points (tests only).
	Hooks *workers.Hooks

	// RedisURL is the Redis of the conversation turns (a go-redis URL);
	// scenarios that run turns need it.
	RedisURL string
	// RedisPrefix is the session locks' key prefix ("": "sesslock:", the
	// seed's, which monitors know). Simulations sharing a Redis but not a
	// database need prefixes of their own.
	RedisPrefix string
	// FailOpen processes a message without the lock while Redis is
	// unreachable (seed 002's risky fallback); default: fail closed.
	FailOpen bool
	// Conversations overrides the scenario's number of conversations (its
	// hot ones keep their proportion).
	Conversations int
	// LeaseStore is where the jobs' lease locks live: "postgres" (the
	// default: the simulator's database, schema LeaseSchema, where a
	// monitor of that database sees them) or "sqlite" (the file LeasePath).
	LeaseStore string
	// LeaseSchema is the lease tables' PostgreSQL schema ("":
	// lease.DefaultSchema, "locktop_lease").
	LeaseSchema string
	// LeasePath is the SQLite file of the lease locks ("": a file in the
	// simulator's own directory, removed by Close).
	LeasePath string
}

// Sim runs a scenario's workloads against one database and checks the
// invariants. Its methods are safe for concurrent use. See the package
// documentation for the life cycle.
type Sim struct {
	opts      Options
	log       *slog.Logger
	proc      string
	workPool  *pgxpool.Pool
	lockPool  *pgxpool.Pool // == workPool in shared mode
	locks     *lockcore.Service
	db        *workers.DB
	env       *workers.Env
	rec       *recorder
	configDir string // the config file's own directory, removed by Close ("" if Options gave a path)
	configSeq atomic.Int64

	// Seeds 002 and 004, set up when a scenario first needs them (see
	// setUpSystems) and kept until Close.
	turns     *workers.Turns
	jobs      *workers.Jobs
	rdb       *redis.Client
	leasePool *pgxpool.Pool
	sysDir    string // the jobs' maps (and SQLite lease file), removed by Close

	// ctl serialises the control methods (start, stop, scenario switches);
	// mu guards the fields below and is held only briefly.
	ctl                    sync.Mutex
	mu                     sync.Mutex
	base                   Scenario // the current scenario, with the options' overrides
	sc                     Scenario // base with the controls' changes (rateScale, workerScale)
	rateScale, workerScale float64
	run                    *runState
	started                time.Time // start of the current or last run
	ran                    time.Duration
	audited                bool
	auditErr               error
	closed                 bool
	gone                   chan struct{} // closed when the server stayed out of reach too long
	goneErr                error         // why; set before gone is closed
	goneOnce               sync.Once

	thrMu   sync.Mutex
	thrAt   time.Time
	thrN    int64
	thrRate float64
}

// runState is one run of the drivers.
type runState struct {
	gen        context.Context // ends: start no more work
	stopGen    context.CancelFunc
	work       context.Context // ends: abandon the work under way
	cancelWork context.CancelFunc
	wg         sync.WaitGroup
	drivers    []*driver // drivers[i] runs Sim.sc.Drivers[i]
	// stopping is set, under Sim.mu, before Stop waits for wg: from then
	// on nothing from outside the run (a fault's burst, more workers) may
	// join it. Follow-up work a running unit spawns still may: the unit
	// keeps wg above zero.
	stopping bool
}

// driver is a running Driver. Its goroutines fire at random (exponential
// gaps, so together they make a Poisson stream of about the driver's rate
// of units per second): evenly spaced arrivals would never collide, real
// ones do.
type driver struct {
	unit    func(s *Sim, ctx context.Context) error
	rate    atomic.Uint64        // math.Float64bits of the rate in Sim.sc, for the goroutines; 0: no limit
	n       atomic.Int64         // goroutines running
	cancels []context.CancelFunc // one per goroutine asked for; guarded by Sim.mu
}

func (d *driver) setRate(perSecond float64) { d.rate.Store(math.Float64bits(perSecond)) }

// gap returns how long one goroutine waits before its next unit.
func (d *driver) gap() time.Duration {
	r := math.Float64frombits(d.rate.Load())
	if r <= 0 {
		return 0
	}
	return time.Duration(mrand.ExpFloat64() * float64(max(d.n.Load(), 1)) / r * float64(time.Second))
}

// New connects the simulator's pools, creates its schema and agents, and
// returns it stopped: call Start or Run. ctx bounds the set-up only.
// An unusable database gives an error wrapping ErrUnusable.
func New(ctx context.Context, opts Options) (*Sim, error) {
	if opts.Scenario == "" {
		opts.Scenario = scenarios[0].Name
	}
	sc, ok := lookup(opts.Scenario)
	if !ok {
		return nil, fmt.Errorf("%w %q (have %v)", ErrUnknownScenario, opts.Scenario, Scenarios())
	}
	if opts.Schema == "" {
		opts.Schema = workers.DefaultSchema
	}
	if err := workers.ValidSchema(opts.Schema); err != nil {
		return nil, err
	}
	if opts.Agents < 0 || opts.Goroutines < 0 || opts.Conversations < 0 {
		return nil, errors.New("sim: agents, conversations and goroutines must not be negative")
	}
	if err := checkSystemOptions(&opts); err != nil {
		return nil, err
	}
	opts.WorkMinConns = cmp.Or(opts.WorkMinConns, DefaultWorkMinConns)
	opts.WorkMaxConns = cmp.Or(opts.WorkMaxConns, DefaultWorkMaxConns)
	opts.LockMaxConns = cmp.Or(opts.LockMaxConns, DefaultLockMaxConns)
	opts.WorkMinConns = min(opts.WorkMinConns, opts.WorkMaxConns)
	opts.EventBuffer = cmp.Or(opts.EventBuffer, 1024)
	opts.StopGrace = cmp.Or(opts.StopGrace, 5*time.Second)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}

	s := &Sim{opts: opts, log: log, proc: newProc(), gone: make(chan struct{})}
	s.rec = newRecorder(opts.EventBuffer, log)
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	ok = false
	defer func() {
		if !ok {
			s.release()
		}
	}()
	if opts.Reset {
		if err := workers.Drop(ctx, s.workPool, opts.Schema); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
	}
	if err := workers.Setup(ctx, s.workPool, opts.Schema); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
	}

	observers := append([]lockcore.Observer{s.rec.observe}, opts.Observers...)
	lopts := []lockcore.Option{lockcore.WithLogger(log)}
	for _, o := range observers {
		lopts = append(lopts, lockcore.WithObserver(o))
	}
	if opts.SharedPool {
		// The seed's single pool: keep its own name, and leave no session
		// lock_timeout behind for the work statements that share it.
		lopts = append(lopts, lockcore.WithApplicationName(""), lockcore.WithSharedPool())
	}
	s.locks = lockcore.New(s.lockPool, lopts...)
	s.db = workers.NewDB(s.workPool)
	s.env = workers.NewEnv(s.db, s.locks, s.rec, s.proc)
	s.env.Hooks = opts.Hooks
	s.env.SetLocking(!opts.NoLocks)
	s.env.Spawn = s.spawn
	s.env.ConfigPath = opts.ConfigPath
	if s.env.ConfigPath == "" {
		dir, err := scratch.New("", "locktop-sim-") // also sweeps what a killed simulator left
		if err != nil {
			return nil, fmt.Errorf("sim: the config editor's file: %w", err)
		}
		s.configDir = dir
		s.env.ConfigPath = filepath.Join(dir, "config.json")
	}
	if err := s.env.Join(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	if err := s.env.Begin(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	if err := s.configure(ctx, sc); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// newProc returns a token for this simulator, unique across processes.
func newProc() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("p%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
}

// connect opens the pools. One connection is made first, on ctx: a pool
// opens its minimum of connections in the background, and closing it waits
// for them, so a server that does not answer must be found out before.
func (s *Sim) connect(ctx context.Context) error {
	// Each attempt is bounded (connect.Bound), as every command's is: a
	// server that accepts connections and never answers must not hang the
	// simulator.
	base, err := connect.PoolConfig(s.opts.DSN)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	pc := base.ConnConfig.Copy()
	pc.RuntimeParams["application_name"] = AppWork
	probe, err := pgx.ConnectConfig(ctx, pc)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnusable, err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = probe.Close(cctx)
	cancel()
	mk := func(app string, minConns, maxConns int32) (*pgxpool.Pool, error) {
		cfg := base.Copy()
		cfg.MinConns, cfg.MaxConns = minConns, maxConns
		cfg.ConnConfig.RuntimeParams["application_name"] = app
		cfg.ConnConfig.RuntimeParams["search_path"] = s.opts.Schema
		if poolConfig != nil {
			poolConfig(cfg)
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		if err := p.Ping(ctx); err != nil {
			p.Close()
			return nil, fmt.Errorf("%w: %w", ErrUnusable, err)
		}
		return p, nil
	}
	if s.opts.SharedPool {
		p, err := mk(AppShared, s.opts.WorkMinConns, s.opts.WorkMaxConns)
		if err != nil {
			return err
		}
		s.workPool, s.lockPool = p, p
		return nil
	}
	w, err := mk(AppWork, s.opts.WorkMinConns, s.opts.WorkMaxConns)
	if err != nil {
		return err
	}
	l, err := mk(AppLock, 0, s.opts.LockMaxConns)
	if err != nil {
		w.Close()
		return err
	}
	s.workPool, s.lockPool = w, l
	return nil
}

// release gives back what New took: the live session, the pools and the
// config file's directory.
func (s *Sim) release() {
	s.closeSystems()
	if s.env != nil {
		s.env.Leave()
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.workPool.Close()
		if s.lockPool != s.workPool {
			s.lockPool.Close()
		}
	}()
	t := time.NewTimer(closeWait)
	select {
	case <-closed:
	case <-t.C:
		s.log.Warn("the server does not answer: the pools' connections are left to close in the background")
	}
	t.Stop()
	if s.configDir != "" {
		if err := os.RemoveAll(s.configDir); err != nil {
			s.log.Warn("removing the config editor's directory", "err", err)
		}
	}
}

// configure makes sc the current scenario, with the overrides of the
// options and none of the controls' changes, and creates its agents. The
// drivers must be stopped.
func (s *Sim) configure(ctx context.Context, sc Scenario) error {
	if s.opts.Agents > 0 && sc.Systems&SystemAgents != 0 {
		sc.Agents = s.opts.Agents
	}
	if s.opts.Conversations > 0 && sc.Systems&SystemTurns != 0 && sc.Conversations > 0 {
		// The hot ones keep their proportion, so that more conversations
		// spread the load rather than queue it on the same few.
		sc.HotConversations = max(1, sc.HotConversations*s.opts.Conversations/sc.Conversations)
		sc.Conversations = s.opts.Conversations
	}
	sc.Hot = min(sc.Hot, sc.Agents)
	sc.HotConversations = min(sc.HotConversations, sc.Conversations)
	for i := range sc.Drivers {
		d := &sc.Drivers[i]
		if d.Kind == workers.KindHook || d.main {
			if s.opts.Goroutines > 0 {
				d.Goroutines = s.opts.Goroutines
			}
			switch {
			case s.opts.HookRate > 0:
				d.Rate = s.opts.HookRate
			case s.opts.HookRate < 0:
				d.Rate = 0 // no limit
			}
		}
	}
	if sc.Systems&SystemAgents != 0 {
		if err := workers.EnsureAgents(ctx, s.db, sc.Agents); err != nil {
			return fmt.Errorf("%w: %w", ErrUnusable, err)
		}
	}
	if err := s.setUpSystems(ctx, sc); err != nil {
		return err
	}
	s.rec.setSystems(sc.Systems)
	s.env.SetTiming(sc.Timing)
	lt := sc.LockTimeout
	if s.opts.LockTimeout > 0 {
		lt = s.opts.LockTimeout
	}
	s.env.SetLockTimeout(lt)
	s.mu.Lock()
	s.base, s.rateScale, s.workerScale = sc, 1, 1
	s.sc = s.scaled()
	s.mu.Unlock()
	return nil
}

// scaled returns the base scenario with the controls' scales applied: each
// rate times rateScale, each driver's goroutines times workerScale rounded
// to a whole number, never below one. Scaling from the base, not from the
// last value, makes ×1.25 then ×0.8 come back exactly where it started.
// s.mu must be held.
func (s *Sim) scaled() Scenario {
	sc := s.base
	sc.Drivers = slices.Clone(s.base.Drivers)
	for i := range sc.Drivers {
		d := &sc.Drivers[i]
		d.Rate *= s.rateScale // no limit (0) stays no limit
		d.Goroutines = max(int(math.Round(float64(d.Goroutines)*s.workerScale)), 1)
	}
	return sc
}

// Start starts the current scenario's workloads and returns at once; they
// run until Stop. Starting a running simulator does nothing.
func (s *Sim) Start() error {
	s.ctl.Lock()
	defer s.ctl.Unlock()
	return s.start()
}

func (s *Sim) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("sim: closed")
	}
	if s.run != nil {
		return nil
	}
	r := &runState{}
	r.gen, r.stopGen = context.WithCancel(context.Background())
	r.work, r.cancelWork = context.WithCancel(context.Background())
	for _, spec := range s.sc.Drivers {
		d := &driver{unit: spec.unit}
		d.setRate(spec.Rate)
		r.drivers = append(r.drivers, d)
		for range spec.Goroutines {
			s.addLoop(r, d)
		}
	}
	r.wg.Go(func() { s.checkConfig(r.gen) })
	r.wg.Go(func() { s.watchServer(r.gen) })
	s.rec.stopping.Store(false)
	s.run = r
	s.started = time.Now()
	s.audited = false
	return nil
}

// addLoop starts one more goroutine of d. s.mu must be held.
func (s *Sim) addLoop(r *runState, d *driver) {
	ctx, cancel := context.WithCancel(r.gen)
	d.cancels = append(d.cancels, cancel)
	d.n.Add(1)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer d.n.Add(-1)
		for {
			if g := d.gap(); g > 0 {
				if workers.Pause(ctx, g) != nil {
					return
				}
			} else if ctx.Err() != nil {
				return
			}
			if err := d.unit(s, r.work); err != nil && ctx.Err() == nil {
				// Back off a little so a broken database is not hammered.
				if workers.Pause(ctx, 50*time.Millisecond) != nil {
					return
				}
			}
		}
	}()
}

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
		if down := s.env.LiveDown(); down > lt {
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

// spawn runs follow-up work within the current run, so Stop waits for it.
// A stopping run still takes it: the unit that spawns it is part of the
// run, so the run's WaitGroup is above zero.
func (s *Sim) spawn(kind workers.Kind, fn func(ctx context.Context)) {
	s.mu.Lock()
	r := s.run
	if r == nil {
		s.mu.Unlock()
		return // the run is over: follow-up work is dropped, as a stopping server drops it
	}
	r.wg.Add(1) // the spawner is a unit of r, so the count is above zero
	s.mu.Unlock()
	go func() {
		defer r.wg.Done()
		fn(r.work)
	}()
}

// Stop stops the workloads: no new work starts, work under way may finish
// for StopGrace and is then cancelled (every lock is released either way).
// Then it applies the events still pending (a final reconcile), audits the
// database and checks that no lock or connection is left. Stopping a
// stopped simulator does nothing.
func (s *Sim) Stop() error {
	s.ctl.Lock()
	defer s.ctl.Unlock()
	if !s.stopDrivers() {
		return nil
	}
	return s.finish()
}

// stopDrivers ends the current run; it reports false if none was running.
func (s *Sim) stopDrivers() bool {
	s.mu.Lock()
	r := s.run
	if r != nil {
		r.stopping = true
	}
	s.mu.Unlock()
	if r == nil {
		return false
	}
	r.stopGen()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	t := time.NewTimer(s.opts.StopGrace)
	select {
	case <-done:
	case <-t.C:
		s.rec.stopping.Store(true)
		r.cancelWork()
		<-done
	}
	t.Stop()
	r.cancelWork()
	s.mu.Lock()
	s.run = nil
	s.ran += time.Since(s.started)
	s.mu.Unlock()
	return true
}

// finish drains, audits and checks for leaks after a run. Against a server
// that was declared gone, or does not answer now, it does not try: the
// final checks are then reported as not run.
func (s *Sim) finish() error {
	if s.isGone() {
		s.mu.Lock()
		s.audited, s.auditErr = true, fmt.Errorf("final checks skipped: %w", s.goneErr)
		s.mu.Unlock()
		return s.goneErr
	}
	pctx, pcancel := context.WithTimeout(context.Background(), finishProbe)
	err := s.workPool.Ping(pctx)
	pcancel()
	if err != nil {
		err = fmt.Errorf("final checks skipped: the server does not answer: %w", err)
		s.mu.Lock()
		s.audited, s.auditErr = true, err
		s.mu.Unlock()
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var errs []error
	if _, err := s.env.Drain(ctx); err != nil {
		errs = append(errs, fmt.Errorf("final reconcile: %w", err))
	}
	if err := s.env.Audit(ctx); err != nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	sys := s.sc.Systems
	s.mu.Unlock()
	if err := s.auditSystems(ctx, sys); err != nil {
		errs = append(errs, err)
	}
	if err := s.checkLeaks(ctx); err != nil {
		errs = append(errs, err)
	}
	err = errors.Join(errs...)
	s.mu.Lock()
	s.audited, s.auditErr = true, err
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("final checks", "err", err)
	}
	return err
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

// Test hooks: poolConfig, when set, adjusts every pool's configuration;
// settleWait is called each time settledPools has to wait.
var (
	poolConfig func(*pgxpool.Config)
	settleWait func()
)

// Run starts the workloads, waits for ctx to end, and stops them (Stop).
// A server restart does not end it: the workloads count their errors and
// go on once the server is back. If the server stays out of reach for
// longer than the lock timeout, Run stops early, without the final checks,
// and returns an error wrapping ErrServerGone.
func (s *Sim) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-s.gone:
	}
	err := s.Stop()
	if s.isGone() {
		return s.goneErr
	}
	return err
}

// Close stops the simulator if it runs, closes its pools and its live
// session, and removes its config file unless Options named one. It is safe
// to call more than once.
func (s *Sim) Close() error {
	err := s.Stop()
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.mu.Lock()
	closed := s.closed
	s.closed = true
	s.mu.Unlock()
	if !closed {
		s.release()
	}
	return err
}

// Scenarios lists the scenario names SetScenario accepts.
func (s *Sim) Scenarios() []string { return Scenarios() }

// SetScenario switches to the named scenario: the running workloads stop
// and the old run ends as Stop ends it (final reconcile, audit, leak
// check: what they find is reported as the old run's); then the counters,
// the invariant counts and the controls' scales start from zero, and the
// new scenario's workloads start. The new run judges only its own work.
func (s *Sim) SetScenario(name string) error {
	sc, ok := lookup(name)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownScenario, name)
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	wasRunning := s.stopDrivers()
	if wasRunning {
		_ = s.finish() // its findings are events and log lines of the old run
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.env.Begin(ctx); err != nil {
		return err
	}
	s.rec.reset()
	s.env.Faults.Clear()
	if s.turns != nil {
		s.turns.ResetStats()
	}
	if s.jobs != nil {
		s.jobs.ResetStats()
	}
	s.mu.Lock()
	s.opts.Scenario = name
	s.ran = 0
	s.audited, s.auditErr = false, nil
	s.mu.Unlock()
	s.thrMu.Lock()
	s.thrAt, s.thrN, s.thrRate = time.Time{}, 0, 0
	s.thrMu.Unlock()
	if err := s.configure(ctx, sc); err != nil {
		return err
	}
	if wasRunning {
		return s.start()
	}
	return nil
}

// maxScale bounds the controls' scales (and 1/maxScale below), so a key
// held down cannot scale the workload to nothing or to millions.
const maxScale = 64

// ScaleRates multiplies every rate of the running scenario by factor and
// returns how many rates it changed: rates without a limit stay without
// one. Rates are scaled exactly, from the scenario's own: ×1.25 then ×0.8
// gives the scenario's rates back. The scale stays within 1/64 and 64 of
// the scenario's. A scenario switch starts at its own rates again.
func (s *Sim) ScaleRates(factor float64) int {
	if factor <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateScale = min(max(s.rateScale*factor, 1.0/maxScale), maxScale)
	s.applyScales()
	n := 0
	for _, d := range s.sc.Drivers {
		if d.Rate > 0 {
			n++
		}
	}
	return n
}

// ScaleWorkers multiplies the workers of the running scenario by factor
// and returns the new total of goroutines: each driver's goroutines are
// the scenario's times the product of the factors so far, rounded to a
// whole number and never below one, so the total moves by about factor
// (26 goroutines ×1.25 make 32, ×0.8 then 26 again: a driver of one
// goroutine stays at one until the scale reaches 1.5). Workers are added
// or removed while the scenario runs (a removed one finishes its unit of
// work first). A scenario switch starts with its own numbers again.
func (s *Sim) ScaleWorkers(factor float64) int {
	if factor <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workerScale = min(max(s.workerScale*factor, 1.0/maxScale), maxScale)
	s.applyScales()
	total := 0
	for _, d := range s.sc.Drivers {
		total += d.Goroutines
	}
	return total
}

// applyScales recomputes the scenario from its base and the scales and
// hands the rates and goroutine counts to the running drivers. s.mu must
// be held.
func (s *Sim) applyScales() {
	s.sc = s.scaled()
	if s.run == nil {
		return
	}
	for i, d := range s.sc.Drivers {
		s.run.drivers[i].setRate(d.Rate)
		if !s.run.stopping {
			s.setLoops(s.run, s.run.drivers[i], d.Goroutines)
		}
	}
}

// setLoops starts or stops goroutines of d until n run. s.mu must be held
// and r must not be stopping.
func (s *Sim) setLoops(r *runState, d *driver, n int) {
	for len(d.cancels) < n {
		s.addLoop(r, d)
	}
	for len(d.cancels) > n {
		last := len(d.cancels) - 1
		d.cancels[last]()
		d.cancels = d.cancels[:last]
	}
}

// SetLocks turns every lock on or off while running; off shows the races.
func (s *Sim) SetLocks(on bool) { s.env.SetLocking(on) }

// ToggleLocks turns every lock off if they are on, and on if they are off,
// and returns the new state. Two toggles at once cancel out, whichever
// runs first.
func (s *Sim) ToggleLocks() bool { return s.env.ToggleLocking() }

// Faults lists the fault names InjectFault accepts: those of the lock
// systems the current scenario runs.
func (s *Sim) Faults() []string {
	s.mu.Lock()
	sys := s.sc.Systems
	s.mu.Unlock()
	var out []string
	for _, f := range faults {
		if sys&f.sys != 0 {
			out = append(out, f.name)
		}
	}
	return out
}

// InjectFault injects the named fault once. Seed 001's: kill-holder (the
// next hook section terminates its own lock's backend), slow-body (the
// next hook section outlasts the lock timeout), reentrant (the next hook
// section tries to take its key again), hook-burst (30 hooks at once on the
// hottest agent). Seed 002's: pod-crash, redis-outage (1.5s),
// message-burst (10 messages delivered twice each on the hottest
// conversation). Seed 004's: worker-dies (holding a map's write lease),
// heartbeat-stall, interrupted-write (the next map write), project-flood
// (16 jobs of p1 at once). A fault of a system the scenario does not run
// is an error.
func (s *Sim) InjectFault(name string) error {
	i := slices.IndexFunc(faults, func(f struct {
		name string
		sys  System
	}) bool {
		return f.name == name
	})
	if i < 0 {
		return fmt.Errorf("%w %q", ErrUnknownFault, name)
	}
	s.mu.Lock()
	sys := s.sc.Systems
	s.mu.Unlock()
	if sys&faults[i].sys == 0 {
		return fmt.Errorf("sim: fault %s: scenario %s does not run its lock system", name, s.Status().Scenario)
	}
	switch name {
	case faultPodCrash:
		s.turns.CrashPod()
		return nil
	case faultInterrupt:
		s.jobs.InterruptNext()
		return nil
	case faultOutage, faultMessageBurst, faultDies, faultStall, faultFlood:
		return s.runFault(func(ctx context.Context) {
			switch name {
			case faultOutage:
				_ = s.turns.Outage(ctx, outageFor)
			case faultMessageBurst:
				fns := make([]func() error, 0, 20)
				for range 10 {
					m := s.turns.NewMessage()
					fns = append(fns, func() error { return s.turns.Deliver(ctx, 1, m) }, func() error { return s.turns.Deliver(ctx, 1, m) })
				}
				_ = both(fns...)
			case faultDies:
				_ = unitDie(s, ctx)
			case faultStall:
				_ = unitStall(s, ctx)
			case faultFlood:
				_ = unitFlood(s, ctx)
			}
		})
	}
	if name == faultBurst {
		s.mu.Lock()
		r := s.run
		if r != nil && !r.stopping {
			r.wg.Add(1)
		} else {
			r = nil
		}
		s.mu.Unlock()
		if r == nil {
			return errors.New("sim: not running")
		}
		go func() {
			defer r.wg.Done()
			fns := make([]func() error, 30)
			for i := range fns {
				fns[i] = func() error { return s.env.Hook(r.work, pickRoute(), 1) }
			}
			_ = both(fns...)
		}()
		return nil
	}
	if !s.env.Faults.Add(name, 1) {
		return fmt.Errorf("%w %q (have %v)", ErrUnknownFault, name, s.Faults())
	}
	return nil
}

// runFault runs fn within the current run (Stop waits for it).
func (s *Sim) runFault(fn func(ctx context.Context)) error {
	s.mu.Lock()
	r := s.run
	if r != nil && !r.stopping {
		r.wg.Add(1)
	} else {
		r = nil
	}
	s.mu.Unlock()
	if r == nil {
		return errors.New("sim: not running")
	}
	go func() {
		defer r.wg.Done()
		fn(r.work)
	}()
	return nil
}

// Events is the stream of what happens: acquires after a wait, skips (and
// who held the key), timeouts, refused reentrant acquires, phantom locks
// cleaned, lost locks, errors and broken invariants. The channel is
// buffered; when it is full, events are dropped (and counted) rather than
// slowing the workers. It is never closed.
func (s *Sim) Events() <-chan model.Event { return s.rec.events }

// Pools returns the simulator's pools: "lock" and "work", or "shared".
func (s *Sim) Pools() []model.PoolStats { return s.pools() }

func (s *Sim) pools() []model.PoolStats {
	if s.opts.SharedPool {
		return []model.PoolStats{poolstats.Of("shared", s.workPool, s.locks.Waiting()+s.db.Waiting())}
	}
	ps := []model.PoolStats{poolstats.Of("lock", s.locks.Pool(), s.locks.Waiting()), poolstats.Of("work", s.workPool, s.db.Waiting())}
	if s.leasePool != nil {
		ps = append(ps, poolstats.Of("lease", s.leasePool, 0))
	}
	return ps
}

// Status returns the simulator's state. It is cheap: counters are atomics
// and the throughput is worked out at most once a second.
func (s *Sim) Status() model.SimStatus {
	s.mu.Lock()
	st := model.SimStatus{
		Scenario:   s.sc.Name,
		Running:    s.run != nil && !s.run.stopping,
		SharedPool: s.opts.SharedPool,
		Agents:     s.sc.Agents,
		Started:    s.started,
	}
	for _, d := range s.sc.Drivers {
		st.Rates = append(st.Rates, model.Rate{Name: d.Name, Value: d.Rate})
	}
	s.mu.Unlock()
	st.LocksEnabled = s.env.Locking()
	st.Workers = s.rec.counters()
	st.Throughput = s.throughput()
	st.Invariants = s.rec.invariants()
	st.Pools = s.pools()
	return st
}

// throughput is completed critical sections per second, over the last
// second or so.
func (s *Sim) throughput() float64 {
	s.thrMu.Lock()
	defer s.thrMu.Unlock()
	now, n := time.Now(), s.rec.sections.Load()
	if s.thrAt.IsZero() {
		s.thrAt, s.thrN = now, n
		return 0
	}
	if dt := now.Sub(s.thrAt); dt >= time.Second {
		s.thrRate = float64(n-s.thrN) / dt.Seconds()
		s.thrAt, s.thrN = now, n
	}
	return s.thrRate
}

// pick returns an agent for a hook: a hot one with the scenario's hot
// share, else any.
func (s *Sim) pick() int32 {
	s.mu.Lock()
	agents, hot, share := s.sc.Agents, s.sc.Hot, s.sc.HotShare
	s.mu.Unlock()
	if hot > 0 && randFloat() < share {
		return int32(randN(hot)) + 1
	}
	return int32(randN(agents)) + 1
}

// pickAny returns any agent.
func (s *Sim) pickAny() int32 {
	s.mu.Lock()
	agents := s.sc.Agents
	s.mu.Unlock()
	return int32(randN(agents)) + 1
}

// batch returns n agents for a background cycle: the hot ones (which a
// background worker meets most often held) and random others.
func (s *Sim) batch(n int) []int32 {
	s.mu.Lock()
	agents, hot := s.sc.Agents, s.sc.Hot
	s.mu.Unlock()
	n = min(n, agents)
	seen := make(map[int32]bool, n)
	out := make([]int32, 0, n)
	for a := int32(1); a <= int32(hot) && len(out) < n; a++ {
		seen[a] = true
		out = append(out, a)
	}
	for len(out) < n {
		a := int32(randN(agents)) + 1
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// pickConv returns a conversation for a message: a hot one with the
// scenario's share, else any.
func (s *Sim) pickConv() int32 {
	s.mu.Lock()
	n, hot, share := s.sc.Conversations, s.sc.HotConversations, s.sc.HotConvShare
	s.mu.Unlock()
	if hot > 0 && randFloat() < share {
		return int32(randN(hot)) + 1
	}
	return int32(randN(n)) + 1
}

// floodShare is the share of jobs that go to the flooding project; evenShare
// spreads work evenly over the projects.
func (s *Sim) floodShare() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sc.FloodShare
}

func (s *Sim) evenShare() float64 { return 1 / float64(len(s.jobs.Projects())) }

func randN(n int) int    { return mrand.IntN(n) }
func randFloat() float64 { return mrand.Float64() }
