package redislock

import (
	"log/slog"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Locker. The zero value gives seed 002's defaults.
type Options struct {
	// Prefix is put before every lock key; default "sesslock:". It should
	// not contain '{' or '}' (a Redis Cluster hash tag would then pin every
	// lock to one slot).
	Prefix string
	// TTL is the lease a grant gets before Redis releases it by itself;
	// default 30s. Acquire never extends it by itself; With does.
	TTL time.Duration
	// Wait is how long Acquire and With wait for a held key; default 5s.
	// A negative Wait means a single try by default. Per call,
	// lockcore.Wait(d) overrides it; TryAcquire and TryWith never wait.
	Wait time.Duration
	// Owner says who holds, for monitors and the audit; default the
	// process's owner id, lockcore.Owner(), which the process's advisory
	// locks and leases carry too. A context's own (lockcore.WithOwner)
	// overrides it for the locks taken with it.
	Owner string
	// FailOpen makes With run fn without the lock when Redis is unreachable
	// (seed 002's fallback), counting it in Stats().FailOpen and logging a
	// warning. Only ErrUnavailable opens, which means Redis could not be
	// reached: a held key, an expired wait and an error reply (OOM, BUSY,
	// READONLY, LOADING, ...: Redis is up, and another holder may hold the
	// key) never do. Default false: With fails with ErrUnavailable.
	FailOpen bool
	// Registerer, if set, gets seed 002's three metrics:
	// session_lock_acquire_duration_seconds{session_key_pattern},
	// session_lock_wait_total and session_lock_failure_total{reason}.
	// Lockers sharing a Registerer share the metrics.
	Registerer prometheus.Registerer
	// Logger, if set, gets a warning for every fail-open run and every hold
	// found lost.
	Logger *slog.Logger
}

// Defaults.
const (
	DefaultPrefix = "sesslock:"
	DefaultTTL    = 30 * time.Second
	DefaultWait   = 5 * time.Second
	// HandOverTTL is the lease a release grants the waiter it hands the key
	// to, until that waiter takes it up and extends it to its own TTL. A
	// waiter that died while queued so keeps the key at most this long.
	HandOverTTL = 2 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	switch {
	case o.Wait == 0:
		o.Wait = DefaultWait
	case o.Wait < 0:
		o.Wait = 0
	}
	if o.Owner == "" {
		o.Owner = lockcore.Owner()
	}
	return o
}

// Timing of waiting and holding.
var (
	// maxPoll bounds the wait between polls of a waiter: the backstop for a
	// release notice that never came (pub/sub is fire-and-forget) and for
	// expiry, which Redis announces late or never.
	maxPoll = 500 * time.Millisecond
	// waiterTTL is how long a waiter's registration lives without a poll
	// renewing it: a waiter that died leaves the queue this long after.
	waiterTTL = defaultWaiterTTL
	// cleanupTimeout bounds the clean-up after a failed or cancelled
	// acquire, and the release at the end of With.
	cleanupTimeout = 2 * time.Second
)

func ms(d time.Duration) int64 { return max(int64(d/time.Millisecond), 1) }

// defaultWaiterTTL is waiterTTL's own value, which tests change.
const defaultWaiterTTL = 3 * time.Second

// defaultWaiterTTLArg is defaultWaiterTTL as the acquire script takes it,
// made an interface once.
var defaultWaiterTTLArg any = ms(defaultWaiterTTL)

// waiterTTLArg is waiterTTL as the acquire script takes it.
func waiterTTLArg() any {
	if waiterTTL == defaultWaiterTTL {
		return defaultWaiterTTLArg
	}
	return ms(waiterTTL)
}
