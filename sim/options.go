// The simulator's options.

package sim

import (
	"log/slog"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/workers"
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
	// WatchDeadlocks runs the deadlock watch in any scenario: every
	// DeadlockPoll it polls this simulator's PostgreSQL, Redis and lease
	// store as a monitor would, and a deadlock it reports breaks
	// InvDeadlocks unless the scenario made it (scenario "deadlock" always
	// watches).
	WatchDeadlocks bool
	// LeasePath is the SQLite file of the lease locks ("": a file in the
	// simulator's own directory, removed by Close).
	LeasePath string
}
