// Package sim runs seed 001's race catalogue as live load, and seeds 002
// and 004's workloads beside it: named scenarios drive the workloads of
// package workers through the real lock libraries against a real database
// (and Redis), check the invariants while they run and at the end, and
// report.
//
// # Life cycle
//
//	s, err := sim.New(ctx, sim.Options{DSN: dsn}) // "steady", locks on, separate lock pool
//	if err != nil { ... }                         // errors.Is(err, sim.ErrUnusable): bad DSN, server down
//	defer s.Close()
//	s.Start()          // returns at once; the workloads run on their own goroutines
//	... s.Status(), s.Events(), s.Pools(), s.SetLocks(false), s.InjectFault("kill-holder") ...
//	s.Stop()           // graceful stop, final reconcile, audit, leak check
//	rep := s.Report()  // rep.OK, rep.Invariants, rep.Workers
//
// Run(ctx) is Start, wait for ctx, Stop. New's ctx bounds only the set-up.
// Stop lets work under way finish for Options.StopGrace (5s), then cancels
// it; every lock and connection is released either way, and Stop then runs
// the final checks. Close stops and closes the pools.
//
// # The dashboard
//
// The embedded mode of the dashboard (locktop with no arguments) is:
//
//	c, _ := pgcluster.Start(ctx, pgcluster.Options{})
//	defer c.Stop()
//	s, _ := sim.New(ctx, sim.Options{DSN: c.DSN("postgres"), Scenario: "steady"})
//	defer s.Close()
//	s.Start()
//	// hand s to the UI as a ui.Simulator, and s.Pools as its pool source
//
// "steady" shows holders with queued waiters on AGENT keys within a few
// seconds: a few hot agents get half of the hooks.
//
// # Pools
//
// Work runs on a pool of 15 to 25 connections (the seed's pool_size 15 and
// max_overflow 10), application_name "locktop.work". Locks come from a
// separate pool ("locktop.lock"), so a body waiting for a work connection
// never starves a lock holder. Options.SharedPool puts both on one pool of
// 25 ("locktop.shared"), as the seed did: scenario "pool-exhaustion" then
// shows waiters holding every connection while holders starve, until lock
// timeouts free some.
//
// # Invariants
//
// The invariants (see package workers) are checked in the database, so two
// simulators on one database share the agents and still check each other's
// sections: the locks live in PostgreSQL. Each simulator keeps a live
// session open while it exists ("locktop.live" and its token), and the
// others count its sections only while that session is there: a simulator
// killed with kill -9 leaves no false overlap behind. Each simulator audits
// the rows it wrote. Options.NoLocks, or SetLocks(false) while running,
// turns every lock off: the checks must then catch the races, as they
// happen (the config file is checked every second), which is the demo of
// why the locks exist.
//
// The config editor's file is the simulator's own unless Options.ConfigPath
// names one to share.
//
// Each run judges only its own work: a scenario switch ends the old run
// with its final checks, and the counters, invariant counts, rate and
// worker scales start afresh; rows an earlier run (or an earlier process
// without locks) wrote are not held against the new one.
//
// # Lost locks
//
// A lock lost while held (its backend terminated, the server restarted) is
// counted per worker kind ("lost", apart from errors), and its critical
// section by how it ended (Report.Losses): aborted because the fence
// refused its write, aborted because the loss cancelled it before it wrote
// again, or lost only after its writes; the writes of the simulator are
// fenced with the lock's fencing token when lockcore gives one (see
// package workers). A successor that finds a lost holder still registered
// does not count an overlap.
//
// # Server restarts
//
// A run rides out a server restart: the pools and the live session
// reconnect, the workloads count their errors meanwhile, and the live
// checks resume. If the live session stays down for longer than the lock
// timeout, Run stops early without the final checks and returns
// ErrServerGone. Connecting is bounded (5s unless the DSN says otherwise),
// and Stop skips the final checks when the server does not answer.
//
// # Seeds 002 and 004
//
// Each scenario runs one or more lock systems (Scenario.Systems, SystemsOf):
// the hook service's agents on advisory locks, the ACF conversation turns on
// the Redis session mutex (workers.Turns; scenario "acf"), the FOLE map,
// sketch and project jobs on lease locks (workers.Jobs; scenario "fole");
// "all" runs the three at once and is the demo's. A system is set up the
// first time a scenario needs it and kept until Close: turns need
// Options.RedisURL (ErrNoRedis otherwise); jobs keep their leases in the
// simulator's database (schema Options.LeaseSchema, "locktop_lease", on a
// pool of their own named AppLease) or in a SQLite file
// (Options.LeaseStore), and their maps in a scratch directory of the
// simulator's. The status and the report show the counters and invariants
// of the running systems only; the report adds what the turns and the jobs
// did (Report.Turns, Report.Jobs). Where says where every kind of lock
// lives, for a monitor. Options.NoLocks and SetLocks switch every system's
// locks.
//
// # Schema
//
// The simulator owns one schema (Options.Schema, "locktop_sim"), created
// idempotently under the SIM_SCHEMA advisory lock; it never touches other
// tables. Against a database of your own, the simulator runs only when
// asked for explicitly.
package sim
