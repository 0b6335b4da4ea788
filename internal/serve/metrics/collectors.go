package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// snapshotCollector serves the last snapshot. It keeps the snapshot already
// summed up, and emits it at scrape time, so a scrape never sees half of one
// snapshot and half of the next.
type snapshotCollector struct {
	held, waiting, longest, backends, taken, latency *prometheus.Desc
	sourceUp, sourceLatency                          *prometheus.Desc
	waitedTotal, recoveries                          *prometheus.Desc
	// byServer: several targets, each metric labelled with its server
	// (the target's name: as many values as targets, a bounded set).
	byServer bool

	mu   sync.Mutex
	have bool
	rows map[snapKey]snapRow
	last model.Snapshot // Locks dropped; the scalar fields only
	// waited and recovered are counters: they keep every label set they
	// ever had (bounded like the gauges'), unlike the rows they come from.
	waited    map[snapKey]float64
	recovered map[recoveryKey]float64
	audits    map[string]*auditMark // by source name: each trail on its own clock
}

// recoveryKey labels lease recoveries: the server's, with several targets.
type recoveryKey struct{ server, namespace string }

type snapKey struct{ server, kind, database, namespace string }

type snapRow struct {
	held, waiting   int
	longest, waited time.Duration // waited: since the poll before, summed
}

func newSnapshotCollector(byServer bool) *snapshotCollector {
	l := []string{"kind", "database", "namespace"}
	var one []string
	src, rec := []string{"source"}, []string{"namespace"}
	if byServer {
		l, one, src, rec = append([]string{"server"}, l...), []string{"server"}, []string{"server", "source"}, []string{"server", "namespace"}
	}
	return &snapshotCollector{
		held:          prometheus.NewDesc("locktop_snapshot_locks_held", "Locks held, as of the monitor's last snapshot.", l, nil),
		waiting:       prometheus.NewDesc("locktop_snapshot_locks_waiting", "Lock requests waiting, as of the monitor's last snapshot.", l, nil),
		longest:       prometheus.NewDesc("locktop_snapshot_longest_wait_seconds", "The longest current wait, as of the monitor's last snapshot.", l, nil),
		backends:      prometheus.NewDesc("locktop_snapshot_backends", "Client backends on the server, as of the monitor's last snapshot.", one, nil),
		taken:         prometheus.NewDesc("locktop_snapshot_timestamp_seconds", "Server time of the monitor's last snapshot, in Unix seconds.", one, nil),
		latency:       prometheus.NewDesc("locktop_snapshot_poll_seconds", "How long the monitor's last poll took, round trip and decoding.", one, nil),
		sourceUp:      prometheus.NewDesc("locktop_source_up", "1 when the source (postgres, redis, lease) answered the monitor's last poll, else 0.", src, nil),
		sourceLatency: prometheus.NewDesc("locktop_source_poll_seconds", "How long the source's part of the monitor's last poll took.", src, nil),
		waitedTotal:   prometheus.NewDesc("locktop_snapshot_wait_seconds_total", "Time lock requests spent waiting, summed over waiters, as the monitor's polls saw it: each poll adds every waiter's wait since the poll before.", l, nil),
		recoveries:    prometheus.NewDesc("locktop_lease_recoveries_total", "Stale lease holders taken over or freed, from the lease audit trail, since this process began watching.", rec, nil),
		rows:          map[snapKey]snapRow{},
		waited:        map[snapKey]float64{},
		recovered:     map[recoveryKey]float64{},
		audits:        map[string]*auditMark{},
		byServer:      byServer,
	}
}

func (c *snapshotCollector) set(s model.Snapshot, l *labeler) {
	rows := make(map[snapKey]snapRow)
	for i := range s.Locks {
		lk := &s.Locks[i]
		kind := string(lk.Kind)
		if kind == "" {
			kind = string(model.KindAdvisory)
		}
		k := snapKey{server: lk.Server, kind: kind, database: lk.Database, namespace: l.lock(lk)}
		r := rows[k]
		if lk.Granted {
			r.held++
		} else {
			r.waiting++
			w := lk.Waited(s.Now(lk))
			r.longest = max(r.longest, w)
			// The time blocked since the poll before: all of the interval
			// for a waiter that was already waiting then, the wait itself
			// for one that began since. The first poll (Interval 0) adds
			// nothing, so a restart does not count old waits twice.
			r.waited += min(w, s.Interval)
		}
		rows[k] = r
	}
	s.Locks = nil
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range rows {
		// A label set is born at 0 (when first seen held, usually), so
		// that its first wait is an increase, not the birth of a series.
		c.waited[k] += r.waited.Seconds()
	}
	c.countRecoveries(s)
	c.have, c.rows, c.last = true, rows, s
}

// countRecoveries counts the audit records each trail did not hold before.
// The first snapshot of a server starts every namespace a recovery can have
// at 0, so that the first recovery is an increase (rate, increase) and not
// the birth of a series. Callers hold c.mu.
func (c *snapshotCollector) countRecoveries(s model.Snapshot) {
	servers := s.Servers()
	if len(servers) == 0 {
		servers = []string{""}
	}
	for _, sv := range servers {
		if _, ok := c.recovered[recoveryKey{sv, LabelOther}]; ok {
			continue
		}
		for _, e := range registry.Of(registry.LeaseLevel) {
			c.recovered[recoveryKey{sv, e.Name}] += 0
		}
		c.recovered[recoveryKey{sv, LabelOther}] += 0
	}
	// Each trail's records, against its own mark, on its own clock. A
	// source's mark is set when it first answers, records or not.
	if len(s.Sources) == 0 {
		c.mark("", s.Taken)
	}
	for _, st := range s.Sources {
		if st.Err == "" {
			c.mark(st.Name, st.Taken)
		}
	}
	trails := map[int][]model.Audit{}
	for _, a := range s.Audit {
		trails[a.Source] = append(trails[a.Source], a)
	}
	for i, recs := range trails {
		name, taken := "", s.Taken
		if i < len(s.Sources) {
			name, taken = s.Sources[i].Name, s.Sources[i].Taken
		}
		mark := c.mark(name, taken)
		server, _ := model.SplitSource(name)
		for _, a := range mark.fresh(recs) {
			ns := registry.NameOf(registry.LeaseLevel, a.Name)
			if ns == "" {
				ns = LabelOther // as the lease gauges label an unregistered resource
			}
			c.recovered[recoveryKey{server, ns}]++
		}
	}
}

// auditMark tells the new records of one audit trail (one lease source)
// from those already counted: it is the newest record counted, or the
// trail's time when first read. What the trail held when the process first
// looked is history, not counted, so the counter says "recovered while
// watched".
type auditMark struct{ at time.Time }

// mark is the mark of the trail of source name, set at taken (the
// source's clock) when it is first seen. Callers hold c.mu.
func (c *snapshotCollector) mark(name string, taken time.Time) *auditMark {
	m := c.audits[name]
	if m == nil {
		m = &auditMark{at: taken}
		c.audits[name] = m
	}
	return m
}

// fresh returns the records newer than the mark, and moves the mark past
// them.
func (m *auditMark) fresh(recs []model.Audit) []model.Audit {
	var out []model.Audit
	newest := m.at
	for _, a := range recs {
		if a.At.After(m.at) {
			out = append(out, a)
			if a.At.After(newest) {
				newest = a.At
			}
		}
	}
	m.at = newest
	return out
}

// Describe implements prometheus.Collector.
func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.held, c.waiting, c.longest, c.backends, c.taken, c.latency, c.sourceUp, c.sourceLatency, c.waitedTotal, c.recoveries} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.have {
		return // no snapshot yet: no gauges rather than false zeros
	}
	for k, r := range c.rows {
		lv := []string{k.kind, k.database, k.namespace}
		if c.byServer {
			lv = append([]string{k.server}, lv...)
		}
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(r.held), lv...)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(r.waiting), lv...)
		ch <- prometheus.MustNewConstMetric(c.longest, prometheus.GaugeValue, r.longest.Seconds(), lv...)
	}
	for k, v := range c.waited {
		lv := []string{k.kind, k.database, k.namespace}
		if c.byServer {
			lv = append([]string{k.server}, lv...)
		}
		ch <- prometheus.MustNewConstMetric(c.waitedTotal, prometheus.CounterValue, v, lv...)
	}
	for k, v := range c.recovered {
		if c.byServer {
			ch <- prometheus.MustNewConstMetric(c.recoveries, prometheus.CounterValue, v, k.server, k.namespace)
		} else {
			ch <- prometheus.MustNewConstMetric(c.recoveries, prometheus.CounterValue, v, k.namespace)
		}
	}
	if c.byServer {
		c.collectServers(ch)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.backends, prometheus.GaugeValue, float64(c.last.Connections))
	ch <- prometheus.MustNewConstMetric(c.taken, prometheus.GaugeValue, float64(c.last.Taken.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, c.last.Latency.Seconds())
	for _, src := range c.last.Sources {
		ch <- prometheus.MustNewConstMetric(c.sourceUp, prometheus.GaugeValue, up(src), src.Name)
		ch <- prometheus.MustNewConstMetric(c.sourceLatency, prometheus.GaugeValue, src.Latency.Seconds(), src.Name)
	}
}

// collectServers emits the per-server gauges of several targets: each
// source's, and each server's backends, time and poll latency from its
// PostgreSQL source ("NAME/postgres") when it answered.
func (c *snapshotCollector) collectServers(ch chan<- prometheus.Metric) {
	for _, src := range c.last.Sources {
		server, name := model.SplitSource(src.Name)
		ch <- prometheus.MustNewConstMetric(c.sourceUp, prometheus.GaugeValue, up(src), server, name)
		ch <- prometheus.MustNewConstMetric(c.sourceLatency, prometheus.GaugeValue, src.Latency.Seconds(), server, name)
		if name != "postgres" || src.Err != "" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.backends, prometheus.GaugeValue, float64(src.Connections), server)
		ch <- prometheus.MustNewConstMetric(c.taken, prometheus.GaugeValue, float64(src.Taken.UnixNano())/1e9, server)
		ch <- prometheus.MustNewConstMetric(c.latency, prometheus.GaugeValue, src.Latency.Seconds(), server)
	}
}

// up is 1 when the source answered, else 0.
func up(src model.SourceStatus) float64 {
	if src.Err == "" {
		return 1
	}
	return 0
}

// poolCollector reads its pool sources at scrape time. byServer: the pools
// of several targets, named "NAME/pool" by their sources, are labelled
// server="NAME", pool="pool".
type poolCollector struct {
	mu       sync.Mutex
	sources  []PoolSource
	byServer bool
	descs    *poolDescs
}

type poolDescs struct {
	max, total, inUse, idle, waiting, acquires, empty, canceled, waitTotal *prometheus.Desc
}

func newPoolDescs(byServer bool) *poolDescs {
	l := []string{"pool"}
	if byServer {
		l = []string{"server", "pool"}
	}
	return &poolDescs{
		max:       prometheus.NewDesc("locktop_pool_max_connections", "Most connections the pool may open.", l, nil),
		total:     prometheus.NewDesc("locktop_pool_connections", "Connections open in the pool, in use or idle.", l, nil),
		inUse:     prometheus.NewDesc("locktop_pool_connections_in_use", "Connections handed out by the pool now.", l, nil),
		idle:      prometheus.NewDesc("locktop_pool_connections_idle", "Idle connections in the pool now.", l, nil),
		waiting:   prometheus.NewDesc("locktop_pool_waiting", "Callers waiting for a connection now (pools whose owner counts them).", l, nil),
		acquires:  prometheus.NewDesc("locktop_pool_acquires_total", "Successful connection acquires.", l, nil),
		empty:     prometheus.NewDesc("locktop_pool_empty_acquires_total", "Acquires that had to wait because no connection was idle.", l, nil),
		canceled:  prometheus.NewDesc("locktop_pool_canceled_acquires_total", "Acquires abandoned by their context.", l, nil),
		waitTotal: prometheus.NewDesc("locktop_pool_acquire_wait_seconds_total", "Time spent acquiring connections, summed.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	d := c.descs
	for _, x := range []*prometheus.Desc{d.max, d.total, d.inUse, d.idle, d.waiting, d.acquires, d.empty, d.canceled, d.waitTotal} {
		ch <- x
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := append([]PoolSource(nil), c.sources...)
	c.mu.Unlock()
	seen := map[string]int{}
	d := c.descs
	for _, src := range sources {
		for _, p := range src() {
			name := p.Name
			if name == "" {
				name = "unnamed"
			}
			seen[name]++
			if n := seen[name]; n > 1 {
				name += "-" + strconv.Itoa(n)
			}
			lv := []string{name}
			if c.byServer {
				server, pool := model.SplitSource(name)
				lv = []string{server, pool}
			}
			gauge := func(desc *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, lv...)
			}
			counter := func(desc *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, lv...)
			}
			gauge(d.max, float64(p.MaxConns))
			gauge(d.total, float64(p.Total))
			gauge(d.inUse, float64(p.InUse))
			gauge(d.idle, float64(p.Idle))
			gauge(d.waiting, float64(p.Waiting))
			counter(d.acquires, float64(p.Acquires))
			counter(d.empty, float64(p.Empty))
			counter(d.canceled, float64(p.Canceled))
			counter(d.waitTotal, p.WaitTotal.Seconds())
		}
	}
}
