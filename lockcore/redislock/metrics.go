package redislock

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/lockcore/registry"
	"github.com/prometheus/client_golang/prometheus"
)

// Failure reasons, the values of session_lock_failure_total's label.
const (
	ReasonTimeout    = "timeout"     // the wait (or the single try) ended with the key held
	ReasonRedisError = "redis_error" // Redis unreachable, or an error reply
	ReasonLost       = "lost"        // a hold found lost (TTL passed, extend refused, force release)
	ReasonNotHeld    = "not_held"    // Release or Extend by a token that no longer holds the key
)

// metrics are seed 002's three, with the seed's names; labels are bounded
// (registry patterns and four reasons).
type metrics struct {
	acquire *prometheus.HistogramVec
	wait    prometheus.Counter
	failure *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		acquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "session_lock_acquire_duration_seconds",
			Help:    "Time to acquire session lock",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"session_key_pattern"}),
		wait: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "session_lock_wait_total",
			Help: "Number of times lock acquisition had to wait",
		}),
		failure: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "session_lock_failure_total",
			Help: "Number of failed lock acquisitions, and holds lost or refused, by reason",
		}, []string{"reason"}),
	}
	m.acquire = register(reg, m.acquire)
	m.wait = register(reg, m.wait)
	m.failure = register(reg, m.failure)
	for _, r := range []string{ReasonTimeout, ReasonRedisError, ReasonLost, ReasonNotHeld} {
		m.failure.WithLabelValues(r) // every reason shows, at 0
	}
	return m
}

// register registers c, or returns the collector already registered under
// its name, so Lockers sharing a Registerer share the metrics.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
	}
	return c
}

// Stats are a Locker's counts since New.
type Stats struct {
	Acquired      int64 // grants, by Acquire, With and hand-over
	Waited        int64 // acquisitions that found the key held and waited
	HandOvers     int64 // releases that gave the key straight to a waiter
	Timeouts      int64 // waits (and single tries) that ended with the key held
	RedisErrors   int64 // operations that failed on Redis
	Lost          int64 // holds found lost
	NotHeld       int64 // Release or Extend refused: the token no longer held the key
	FailOpen      int64 // With runs without the lock because Redis was unreachable
	ForceReleases int64 // ForceRelease calls that deleted a hold
}

type counters struct {
	acquired, waited, handOvers, timeouts, redisErrors, lost, notHeld, failOpen, forced atomic.Int64
}

// Stats returns the Locker's counts.
func (l *Locker) Stats() Stats {
	c := &l.count
	return Stats{
		Acquired: c.acquired.Load(), Waited: c.waited.Load(), HandOvers: c.handOvers.Load(),
		Timeouts: c.timeouts.Load(), RedisErrors: c.redisErrors.Load(), Lost: c.lost.Load(),
		NotHeld: c.notHeld.Load(), FailOpen: c.failOpen.Load(), ForceReleases: c.forced.Load(),
	}
}

func (l *Locker) observeAcquire(key string, d time.Duration) {
	l.count.acquired.Add(1)
	if l.m != nil {
		l.m.acquire.WithLabelValues(registry.RedisPattern(l.prefix, key)).Observe(d.Seconds())
	}
}

func (l *Locker) observeWait() {
	l.count.waited.Add(1)
	if l.m != nil {
		l.m.wait.Inc()
	}
}

func (l *Locker) observeFailure(reason string) {
	switch reason {
	case ReasonTimeout:
		l.count.timeouts.Add(1)
	case ReasonRedisError:
		l.count.redisErrors.Add(1)
	case ReasonLost:
		l.count.lost.Add(1)
	case ReasonNotHeld:
		l.count.notHeld.Add(1)
	}
	if l.m != nil {
		l.m.failure.WithLabelValues(reason).Inc()
	}
}
