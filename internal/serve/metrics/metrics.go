package metrics

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/model/waitfor"
)

// Label values that stand for many keys.
const (
	// LabelBigint is the namespace label of every one-bigint key that is not
	// a registered fixed id: hashed keys spread over the whole range and
	// cannot be named back, so they share one label value.
	LabelBigint = "bigint"
	// LabelOther is the namespace label of unregistered two-int spaces once
	// MaxSpaceLabels of them have been seen.
	LabelOther = "other"
	// MaxSpaceLabels bounds how many unregistered two-int spaces get a label
	// value of their own.
	MaxSpaceLabels = 64
)

// Buckets of the wait and hold histograms, in seconds: from an uncontended
// grant on a local server to past the default 15s timeout.
var (
	WaitBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30}
	HoldBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
)

// PoolSource reports connection pools. It is called at every scrape, from the
// scraping goroutine, so it must be quick and must not do I/O (pgxpool's Stat
// and poolstats.Of are both in memory). Pool names should be unique
// across sources; a repeated name gets a "-2", "-3" suffix.
type PoolSource func() []model.PoolStats

// Metrics holds locktop's metrics and the registry they are served from. It
// is safe for concurrent use.
type Metrics struct {
	reg    *prometheus.Registry
	labels labeler

	attempts  *prometheus.CounterVec
	acquired  *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	timeouts  *prometheus.CounterVec
	reentrant *prometheus.CounterVec
	canceled  *prometheus.CounterVec
	failures  *prometheus.CounterVec
	phantoms  *prometheus.CounterVec
	lost      *prometheus.CounterVec
	wait      *prometheus.HistogramVec
	hold      *prometheus.HistogramVec
	held      *prometheus.GaugeVec

	pollErrors *prometheus.CounterVec
	deadlocks  *prometheus.CounterVec
	byServer   bool
	detMu      sync.Mutex
	det        waitfor.Detector // cycles of waits, one step per Snapshot
	snap       *snapshotCollector
	pools      *poolCollector
}

// An Option changes what New builds.
type Option func(*options)

type options struct{ byServer bool }

// ByServer labels the snapshot and source metrics with the target they
// are of ("server"), for a locktop that watches several servers: as many
// values as targets, a bounded set. Without it they carry no such label,
// as before.
func ByServer() Option { return func(o *options) { o.byServer = true } }

// New returns Metrics on a fresh registry that also carries the Go runtime
// and process collectors.
func New(opts ...Option) *Metrics {
	var o options
	for _, f := range opts {
		f(&o)
	}
	ns := []string{"namespace"}
	nsAcq := []string{"namespace", "acquire"}
	// Of several targets, what is of one target says which.
	var server []string
	kinds := []string{"kinds"}
	if o.byServer {
		server, kinds = []string{"server"}, []string{"server", "kinds"}
	}
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		reg:       prometheus.NewRegistry(),
		attempts:  counter("locktop_lock_attempts_total", "Lock acquires and tries begun by this process (acquire=blocking|try).", nsAcq),
		acquired:  counter("locktop_lock_acquired_total", "Locks granted to this process (acquire=blocking|try).", nsAcq),
		skipped:   counter("locktop_lock_skipped_total", "Tries that found the key held elsewhere and skipped.", ns),
		timeouts:  counter("locktop_lock_timeouts_total", "Blocking acquires that gave up after their timeout.", ns),
		reentrant: counter("locktop_lock_reentrant_refusals_total", "Acquires refused because the caller's context already held the key.", ns),
		canceled:  counter("locktop_lock_canceled_total", "Acquires ended by the caller's context.", ns),
		failures:  counter("locktop_lock_failures_total", "Acquires that failed for another reason (e.g. a broken connection).", ns),
		phantoms:  counter("locktop_lock_phantom_unlocks_total", "Failed acquires that had in fact been granted and were unlocked (PostgreSQL bug #17686).", ns),
		lost:      counter("locktop_lock_lost_total", "Locks whose session ended while they were held.", ns),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "locktop_lock_wait_seconds",
			Help:    "Time from the start of an acquire to the grant, for granted locks (acquire=blocking|try).",
			Buckets: WaitBuckets,
		}, nsAcq),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "locktop_lock_hold_seconds",
			Help:    "Time locks were held by this process, from grant to release.",
			Buckets: HoldBuckets,
		}, ns),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "locktop_lock_held",
			Help: "Locks this process holds now.",
		}, ns),
		pollErrors: counter("locktop_monitor_poll_errors_total", "Polls of the lock table that failed.", server),
		deadlocks: counter("locktop_deadlocks_total",
			"Deadlocks found: cycles of waits, across lock kinds and sources, seen in two consecutive polls (kinds=the kinds of their waits, e.g. advisory+redis; server=the targets of their waits, e.g. a or a+b).",
			kinds),
		byServer: o.byServer,
		snap:     newSnapshotCollector(o.byServer),
		pools:    &poolCollector{byServer: o.byServer, descs: newPoolDescs(o.byServer)},
	}
	m.labels.spaces = map[string]struct{}{}
	if !o.byServer {
		m.pollErrors.WithLabelValues() // served at 0 before the first failure
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.attempts, m.acquired, m.skipped, m.timeouts, m.reentrant, m.canceled, m.failures, m.phantoms, m.lost,
		m.wait, m.hold, m.held, m.pollErrors, m.deadlocks, m.snap, m.pools,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "locktop_lock_order_inversions_total",
			Help: "Acquires of this process that took locks of two classes in the reverse of an order seen or declared before (lockcore.Order): a deadlock waiting to happen.",
		}, func() float64 { return float64(lockcore.InversionsTotal()) }),
	)
	return m
}

// Registry returns the registry the metrics live in, for registering more
// collectors or for gathering in tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text (or OpenMetrics)
// format. A collector that fails does not hide the others.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:            m.reg,
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}

// Observer returns a lockcore observer that counts every lock event of the
// services it is given to. It runs on the lock call's goroutine, so it is
// kept cheap: a label lookup and an atomic add or two.
func (m *Metrics) Observer() lockcore.Observer {
	return func(e lockcore.Event) {
		ns := m.labels.key(e.Key)
		acq := "try"
		if e.Blocking {
			acq = "blocking"
		}
		switch e.Kind {
		case lockcore.EventAttempt:
			m.attempts.WithLabelValues(ns, acq).Inc()
		case lockcore.EventAcquired:
			m.acquired.WithLabelValues(ns, acq).Inc()
			m.wait.WithLabelValues(ns, acq).Observe(e.Wait.Seconds())
			m.held.WithLabelValues(ns).Inc()
		case lockcore.EventSkipped:
			m.skipped.WithLabelValues(ns).Inc()
		case lockcore.EventTimeout:
			m.timeouts.WithLabelValues(ns).Inc()
		case lockcore.EventReentrant:
			m.reentrant.WithLabelValues(ns).Inc()
		case lockcore.EventCanceled:
			m.canceled.WithLabelValues(ns).Inc()
		case lockcore.EventFailed:
			m.failures.WithLabelValues(ns).Inc()
		case lockcore.EventPhantom:
			m.phantoms.WithLabelValues(ns).Inc()
		case lockcore.EventReleased:
			m.hold.WithLabelValues(ns).Observe(e.Held.Seconds())
			m.held.WithLabelValues(ns).Dec()
		case lockcore.EventLost:
			m.lost.WithLabelValues(ns).Inc()
			m.hold.WithLabelValues(ns).Observe(e.Held.Seconds())
			m.held.WithLabelValues(ns).Dec()
		}
	}
}

// Snapshot publishes a lock table read by the monitor: the held and waiting
// locks and the longest wait by kind, database and namespace, the server's
// client backends, the poll's latency and its time. It replaces the previous
// snapshot whole, so gauges of namespaces that are gone disappear.
// Each call is also one poll for deadlock detection (model/waitfor): a
// cycle of waits in this snapshot and the previous one counts once in
// locktop_deadlocks_total.
// The graph is waitfor.For's: built once for the snapshot, whoever else
// looks at it.
func (m *Metrics) Snapshot(s model.Snapshot) {
	m.Publish(s)
	m.detMu.Lock()
	_, fresh := m.det.Observe(waitfor.For(&s))
	m.detMu.Unlock()
	m.Deadlocks(fresh)
}

// Publish publishes s as Snapshot does, without looking for deadlocks: for
// a caller whose own detector follows the same polls and counts what it
// finds with Deadlocks (the dashboard, whose screen has the graph already).
func (m *Metrics) Publish(s model.Snapshot) { m.snap.set(s, &m.labels) }

// Deadlocks counts new deadlocks (waitfor.Detector's fresh ones) in
// locktop_deadlocks_total.
func (m *Metrics) Deadlocks(fresh []waitfor.Cycle) {
	for i := range fresh {
		if m.byServer {
			m.deadlocks.WithLabelValues(fresh[i].ServersLabel(), fresh[i].KindsLabel()).Inc()
		} else {
			m.deadlocks.WithLabelValues(fresh[i].KindsLabel()).Inc()
		}
	}
}

// Servers starts the per-target counters of every target at 0 (with
// ByServer), so that a target's first poll error is an increase, not the
// birth of a series.
func (m *Metrics) Servers(names ...string) {
	for _, n := range names {
		if m.byServer {
			m.pollErrors.WithLabelValues(n)
		}
	}
}

// PollFailed counts a poll of the lock table of server (the target's name;
// "" of the one unnamed target) that failed. The gauges of the last good
// snapshot stay; locktop_snapshot_timestamp_seconds shows its age.
func (m *Metrics) PollFailed(server string) {
	if m.byServer {
		m.pollErrors.WithLabelValues(server).Inc()
	} else {
		m.pollErrors.WithLabelValues().Inc()
	}
}

// AddPools registers a source of pool statistics, read at every scrape.
func (m *Metrics) AddPools(src PoolSource) {
	if src == nil {
		return
	}
	m.pools.mu.Lock()
	m.pools.sources = append(m.pools.sources, src)
	m.pools.mu.Unlock()
}

// labeler turns keys into namespace label values, keeping their number
// bounded.
type labeler struct {
	mu     sync.Mutex
	spaces map[string]struct{} // unregistered two-int spaces given a label of their own
}

// key labels a lockcore key.
func (l *labeler) key(k lockcore.Key) string { return l.advisory(k.IsPair(), k.Namespace()) }

// lock labels a lock row. Lease kinds name their own (bounded) namespaces.
func (l *labeler) lock(r *model.Lock) string {
	if r.Kind != model.KindAdvisory && r.Kind != "" {
		if r.Namespace == "" {
			return LabelOther
		}
		return r.Namespace
	}
	return l.advisory(r.Pair, r.Namespace)
}

// advisory labels an advisory key from its pair flag and its Namespace() as
// lockcore spells it: a registered name, a bare space number, or "".
func (l *labeler) advisory(pair bool, ns string) string {
	if !pair {
		if ns == "" {
			return LabelBigint
		}
		return ns // a registered fixed id
	}
	if _, err := strconv.ParseInt(ns, 10, 32); err != nil {
		return ns // a registered space
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.spaces[ns]; ok {
		return ns
	}
	if len(l.spaces) >= MaxSpaceLabels {
		return LabelOther
	}
	l.spaces[ns] = struct{}{}
	return ns
}
