package cli

import (
	"github.com/locktop/locktop/internal/record/history"
	"github.com/locktop/locktop/internal/record/recording"

	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/poolstats"
	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/serve/metrics"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// monitoring is the HTTP surface over one monitor and the other lock
// sources (a Redis, a lease table): its metrics, the newest snapshot of
// every source merged, and the handler serving both. `locktop serve`
// builds one that polls every source itself; the dashboard's --http builds
// one whose other sources are polled by the dashboard (tee), and calls
// Poll from its own poll loop.
type monitoring struct {
	members []*member // the targets; members[0] is server's
	met     *metrics.Metrics
	latest  *httpapi.Latest
	handler http.Handler
	log     *slog.Logger
	// server polls the monitor: through the Stack's redactor and recorder.
	server source.PollFunc

	// others are the sources beside the pgsource. pollOthers: poll them
	// beside the monitor (serve); else their newest answers, put by tee,
	// are merged in (the dashboard).
	others     []source.Source
	pollOthers bool
	mu         sync.Mutex
	last       []model.Part
	hist       *history.History // the kept past, once set (keep)

	// fleet: several targets. Polling itself (serve), the Stack then polls
	// every source on a loop of its own (loopEach), so that a slow or dead
	// target never delays another; parts are their newest answers, the
	// server's first.
	fleet    bool
	parts    []model.Part
	answered []time.Time // when each part last answered
	// waiting: whether each part's newest answer has a waiter, counted
	// once per answer (a count over every part's locks after each poll
	// cost the collector time in the square of its targets).
	waiting []bool
	pgName  string // the server's part's name: "postgres", "NAME/postgres"
}

// Poll reads the lock table once for the dashboard and publishes it, with
// the other sources' newest answers, to the metrics and the endpoints, so
// --http serves the dashboard's own polls. It returns the server's
// snapshot alone: the dashboard shows the other sources from their own
// polls.
func (mo *monitoring) Poll(ctx context.Context) (model.Snapshot, error) {
	s, err := mo.server(ctx)
	mo.mu.Lock()
	parts := append([]model.Part{{Name: mo.pgName, Snapshot: s, Err: err}}, mo.last...)
	mo.mu.Unlock()
	if err != nil {
		mo.met.PollFailed(mo.members[0].name)
	}
	// The other sources' answers are served while PostgreSQL is down too.
	// The dashboard looks for deadlocks in what it shows, and counts them
	// here (Stack.Deadlocks): a second graph of this merge is not built.
	if merged, ok := mergeAnswered(parts); ok {
		if err == nil {
			mo.met.Publish(merged)
		}
		mo.latest.Put(merged)
	}
	return s, err
}

// mergeAnswered merges the parts if any of them answered: a source that
// fails leaves out its own locks only, and says why in Sources.
func mergeAnswered(parts []model.Part) (model.Snapshot, bool) {
	for _, p := range parts {
		if p.Err == nil {
			return model.Merge(parts), true
		}
	}
	return model.Snapshot{}, false
}

// tee wraps other source i so that its answers, polled by the dashboard,
// are merged into what the endpoints serve.
func (mo *monitoring) tee(i int) source.Source {
	src := mo.others[i]
	return source.Named(src.Name(), func(ctx context.Context) (model.Snapshot, error) {
		s, err := src.Poll(ctx)
		mo.mu.Lock()
		mo.last[i] = model.Part{Name: src.Name(), Snapshot: s, Err: err}
		mo.mu.Unlock()
		mo.countFailure(src.Name(), err)
		return s, err
	})
}

// countFailure counts a failed poll of a target's server (a source
// "NAME/postgres") in locktop_monitor_poll_errors_total.
func (mo *monitoring) countFailure(name string, err error) {
	if server, src := model.SplitSource(name); err != nil && src == pgSource {
		mo.met.PollFailed(server)
	}
}

// Info describes the server.
func (mo *monitoring) Info() model.ServerInfo { return mo.members[0].Info() }

// poll reads every source once (the others beside the monitor, or their
// newest answers) and publishes the merged snapshot to the metrics. A
// source's failure is in the snapshot's Sources, PostgreSQL's too: it
// fails only when no source answered (with no other source, when the
// monitor's poll fails).
func (mo *monitoring) poll(ctx context.Context) (model.Snapshot, error) {
	var parts []model.Part
	switch {
	case mo.fleet && mo.pollOthers:
		// Every source polls on its own loop: the newest answers, no I/O.
		mo.mu.Lock()
		parts = slices.Clone(mo.parts)
		mo.mu.Unlock()
	case mo.pollOthers && len(mo.others) > 0:
		all := append([]source.Source{source.Named(mo.pgName, mo.server)}, mo.others...)
		parts = source.PollAll(ctx, all)
	default:
		s, err := mo.server(ctx)
		parts = []model.Part{{Name: mo.pgName, Snapshot: s, Err: err}}
		mo.mu.Lock()
		parts = append(parts, mo.last...)
		mo.mu.Unlock()
	}
	err := parts[0].Err
	if err != nil && !mo.fleet {
		mo.met.PollFailed(mo.members[0].name) // a fleet's loops count their own
	}
	merged, ok := mergeAnswered(parts)
	if !ok || len(mo.others) == 0 {
		if err != nil {
			return model.Snapshot{}, err
		}
		if !ok {
			return model.Snapshot{}, errors.New("no source answered")
		}
		merged.Sources = nil // one source: the snapshot is the server's, as before
	}
	if err == nil {
		mo.met.Snapshot(merged)
	}
	return merged, nil
}

// loop polls every interval (every fast while a lock is waited for, when
// fast is shorter) until ctx ends, keeping latest and the snapshot gauges
// fresh. A failing poll is logged once, and again when it recovers.
func (mo *monitoring) loop(ctx context.Context, interval, fast time.Duration) {
	if mo.fleet {
		mo.loopEach(ctx, interval, fast)
		return
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	failing := false
	for {
		begun := time.Now()
		s, err := mo.poll(ctx)
		if err == nil && len(s.Sources) > 0 && s.Sources[0].Err != "" {
			// PostgreSQL failed, the other sources answered: serve them, and
			// log the failure as before.
			mo.latest.Put(s)
			err = errors.New(s.Sources[0].Err)
		}
		next := interval
		if _, waiting := s.Counts(); err == nil && waiting > 0 && fast > 0 && fast < interval {
			next = fast
		}
		t.Reset(max(next-time.Since(begun), 0))
		switch {
		case err == nil:
			mo.latest.Put(s)
			if failing {
				mo.log.Info("polling the lock table again")
				failing = false
			}
		case ctx.Err() != nil:
			return
		case !failing:
			mo.log.Warn("polling the lock table failed; retrying every interval", "err", err.Error(), "interval", interval)
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// newMonitoring wires metrics, a Latest that polls by itself once its
// snapshot is older than twice interval, and the handler. Each target's
// monitor pool is registered for the pool metrics as "monitor" ("NAME/monitor"
// of several targets: server="NAME", pool="monitor"); add more with
// met.AddPools. With several targets the metrics carry a server label, and
// /healthz reports each target.
func newMonitoring(members []*member, server source.PollFunc, others []source.Source, pollOthers bool, interval time.Duration, qt querytext.Mode, log *slog.Logger) *monitoring {
	fleet := members[0].name != ""
	var mopts []metrics.Option
	if fleet {
		mopts = append(mopts, metrics.ByServer())
	}
	mo := &monitoring{members: members, server: server, met: metrics.New(mopts...), log: log, others: others, pollOthers: pollOthers,
		fleet: fleet, pgName: members[0].apiName()}
	for _, m := range members {
		mo.met.Servers(m.name)
	}
	mo.last = make([]model.Part, len(others))
	for i, o := range others {
		mo.last[i] = model.Part{Name: o.Name(), Err: errNotPolled}
	}
	mo.parts = append([]model.Part{{Name: mo.pgName, Err: errNotPolled}}, mo.last...)
	mo.answered = make([]time.Time, len(mo.parts))
	mo.waiting = make([]bool, len(mo.parts))
	mo.met.AddPools(func() []model.PoolStats {
		var out []model.PoolStats
		for _, m := range members {
			if mon := m.current(); mon != nil {
				out = append(out, poolstats.Of(model.SourceName(m.name, "monitor"), mon.Pool(), 0))
			}
		}
		return out
	})
	mo.latest = httpapi.NewLatest(mo.poll, 2*interval)
	deps := httpapi.Deps{
		Latest:    mo.latest,
		Info:      members[0].Info,
		Health:    members[0].Probe,
		Metrics:   mo.met.Handler(),
		LockOrder: lockcore.Order().Handler(),
		Past:      mo,
		Log:       log,
		QueryText: qt,
		Version:   versionString(),
	}
	if fleet {
		deps.Health = mo.fleetHealth
		deps.Targets = func() []httpapi.TargetHealth { return mo.targets(interval) }
	}
	mo.handler = httpapi.New(deps)
	return mo
}

// errNotPolled is a source's part before its first answer.
var errNotPolled = errors.New("not polled yet")

// Recording is the kept past (httpapi.Past), or history.ErrEmpty before
// the history is set.
func (mo *monitoring) Recording() (*recording.Recording, error) {
	mo.mu.Lock()
	h := mo.hist
	mo.mu.Unlock()
	if h == nil {
		return nil, history.ErrEmpty
	}
	return h.Recording()
}

// Bytes is the kept past as a recording file's bytes (httpapi.Past).
func (mo *monitoring) Bytes() ([]byte, error) {
	mo.mu.Lock()
	h := mo.hist
	mo.mu.Unlock()
	if h == nil {
		return nil, history.ErrEmpty
	}
	return h.Bytes()
}

// keep makes h the past the endpoints answer from.
func (mo *monitoring) keep(h *history.History) {
	mo.mu.Lock()
	mo.hist = h
	mo.mu.Unlock()
}

// pgSource names the PostgreSQL monitor among the source.
const pgSource = "postgres"
