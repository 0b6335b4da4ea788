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
	"github.com/locktop/locktop/internal/testenv/scratch"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
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

// Sim runs a scenario's workloads against one database and checks the
// invariants. Its methods are safe for concurrent use. See the package
// documentation for the life cycle.
type Sim struct {
	opts      Options
	order     *lockcore.OrderGraph // the lock order its workloads' acquires take
	log       *slog.Logger
	proc      string
	workPool  *pgxpool.Pool
	lockPool  *pgxpool.Pool // == workPool in shared mode
	locks     *lockcore.Service
	tasks     atomic.Int64 // hook requests so far: each its own owner id
	db        *workers.DB
	env       *workers.Env
	rec       *recorder
	configDir string // the config file's own directory, removed by Close ("" if Options gave a path)
	configSeq atomic.Int64

	// Seeds 002 and 004, set up when a scenario first needs them (see
	// setUpSystems) and kept until Close.
	turns     *workers.Turns
	sessions  *redislock.Locker // the lock-order scenario's session locks, beside the pods'
	jobs      *workers.Jobs
	rdb       redis.UniversalClient
	leasePool *pgxpool.Pool
	dead      *deadlocks     // the deadlock system and its watch's findings
	deadStats *DeadlockStats // the last run's, once checked
	sysDir    string         // the jobs' maps (and SQLite lease file), removed by Close

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
	// The simulator's acquires record their lock order in a graph of its
	// own, so that its inversions are its runs' (and not another Sim's in
	// the same process).
	s.order = lockcore.NewOrderGraph()
	s.order.SetLogger(log)
	s.order.OnInversion(s.rec.inversion)
	s.rec.watchDeadlocks = opts.WatchDeadlocks
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
	lopts := []lockcore.Option{lockcore.Logger(log)}
	for _, o := range observers {
		lopts = append(lopts, lockcore.Observe(o))
	}
	if opts.SharedPool {
		// The seed's single pool: keep its own name, and leave no session
		// lock_timeout behind for the work statements that share it.
		lopts = append(lopts, lockcore.ApplicationName(""), lockcore.SharedPool())
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
	s.order.Reset() // each run judges its own order
	r.work, r.cancelWork = context.WithCancel(lockcore.WithOrder(context.Background(), s.order))
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
	if s.sc.Systems&SystemDeadlocks != 0 || s.opts.WatchDeadlocks {
		if s.dead == nil {
			s.dead = &deadlocks{}
		}
		d := s.dead
		r.wg.Go(func() { s.watchDeadlocks(r.gen, d) })
	}
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

// Test hooks: poolConfig, when set, adjusts every pool's configuration;
// settleWait is called each time settledPools has to wait.
var (
	poolConfig func(*pgxpool.Config)
	settleWait func()
)
