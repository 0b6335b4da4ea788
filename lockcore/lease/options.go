package lease

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/locktop/locktop/internal/leasedb"
	"github.com/locktop/locktop/lockcore"
)

// Options configures a Manager. The zero value is the defaults.
type Options struct {
	// Owner names this process in the table (lease rows, audit records,
	// waiters). Default the process's owner id, lockcore.Owner()
	// ("host:pid:rand": a host name alone would not tell two processes on
	// one host apart, ShedLock #317), which its advisory and Redis locks
	// carry too. A context's own (lockcore.WithOwner) overrides it for the
	// locks taken with it.
	Owner string
	// Lease is how long a grant lasts without a heartbeat. Default 30s.
	Lease time.Duration
	// Heartbeat is how often held leases (and jobs) are renewed. Default
	// Lease/3 (10s for the default lease); it must be at most Lease/2.
	// Negative: no heartbeats, the lease simply runs out.
	Heartbeat time.Duration
	// Grace is how old a heartbeat must be, past the lease, before this
	// Manager recovers the grant as stale. Default 2× Heartbeat, or 20s
	// when heartbeats are off.
	Grace time.Duration
	// Wait bounds Acquire, Upgrade and AcquireAll. Default DefaultWait
	// (30s); lockcore.Wait(d) overrides it for one Acquire or With.
	Wait time.Duration
	// Schema is the PostgreSQL schema of the tables. Default
	// "locktop_lease". Unused by SQLite, whose file holds only these tables.
	Schema string
	// Job caps (seed 004 §7.1), enforced across every process sharing the
	// database; 0 means no cap. Every process should use the same caps: a
	// scheduling pass applies the caps of the Manager that runs it.
	MaxGlobalJobs, MaxJobsPerProject, MaxMapJobsPerProject int
	// Logger receives warnings (a heartbeat that failed, a listener that
	// reconnects). Default: discarded.
	Logger *slog.Logger
}

// DefaultSchema is the PostgreSQL schema used when Options.Schema is empty.
const DefaultSchema = "locktop_lease"

// DefaultWait is how long Acquire waits unless told otherwise.
const DefaultWait = 30 * time.Second

// withDefaults fills in the defaults and checks the result.
func (o Options) withDefaults() (Options, error) {
	if o.Owner == "" {
		o.Owner = lockcore.Owner()
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.Lease < 10*time.Millisecond {
		return o, fmt.Errorf("lease: Lease %s is too short (at least 10ms)", o.Lease)
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = o.Lease / 3
	}
	// A heartbeat must land well within the lease, or every lock is lost
	// between two beats (pglock's ErrDurationTooSmall, Chainlink's panic).
	if o.Heartbeat > o.Lease/2 {
		return o, fmt.Errorf("lease: Heartbeat %s must be at most half of Lease %s", o.Heartbeat, o.Lease)
	}
	if o.Grace == 0 {
		if o.Heartbeat > 0 {
			o.Grace = 2 * o.Heartbeat
		} else {
			o.Grace = 20 * time.Second
		}
	}
	if o.Grace < 0 {
		return o, fmt.Errorf("lease: negative Grace %s", o.Grace)
	}
	if o.Wait == 0 {
		o.Wait = DefaultWait
	}
	if o.Wait < 0 {
		return o, fmt.Errorf("lease: negative Wait %s (use TryAcquire not to wait)", o.Wait)
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if !leasedb.ValidSchema(o.Schema) {
		return o, fmt.Errorf("lease: bad Schema %q (lower-case letters, digits and '_', at most 48)", o.Schema)
	}
	if o.MaxGlobalJobs < 0 || o.MaxJobsPerProject < 0 || o.MaxMapJobsPerProject < 0 {
		return o, fmt.Errorf("lease: negative job cap")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o, nil
}

// backoff bounds of a waiting acquire: the first retry after minBackoff,
// doubling up to maxBackoff (with jitter). Release wake-ups cut the wait
// short; the backoff is what is left when a wake-up is missed or comes from
// a process that cannot send one (SQLite across processes).
func (o Options) backoff() (lo, hi time.Duration) {
	lo = 16 * time.Millisecond // bsm/redislock's 4 ms first wait is a pitfall (anchors §8)
	hi = min(max(o.Lease/10, 50*time.Millisecond), time.Second)
	return lo, hi
}

// waiterTTL is how long a waiter row stays live without a retry refreshing
// it: a process that dies while waiting stops holding readers back (writer
// precedence) after this long.
func (o Options) waiterTTL() time.Duration {
	_, hi := o.backoff()
	return max(10*hi, 2*time.Second)
}
