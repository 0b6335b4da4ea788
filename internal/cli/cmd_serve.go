package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/poolstats"
	"github.com/locktop/locktop/internal/record/history"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/serve/metrics"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/model"
)

func init() {
	register(command{name: "serve", summary: "serve /api/locks, /api/advisory-locks, /metrics and /healthz for a database, without a terminal", run: runServe})
}

// minInterval keeps a mistyped --interval from hammering the server.
const minInterval = 100 * time.Millisecond

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve")
	conn := addConnFlags(fs)
	addr := fs.String("http", httpapi.DefaultAddr, "address to serve on, host:port (loopback unless you say otherwise)")
	interval := fs.Duration("interval", 2*time.Second, "how often to poll the lock table for the metrics")
	record := fs.String("record", "", "also record every poll to this new `file` (locktop replay and report read it)")
	waitInterval := addWaitInterval(fs)
	hf := addHistoryFlags(fs)
	lf := addSourceFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval < minInterval {
		return usagef("--interval %s is too short (at least %s)", *interval, minInterval)
	}
	if err := checkWaitInterval(*waitInterval); err != nil {
		return err
	}
	dsn, given := conn.resolve()
	if !given {
		return usagef("serve needs a database: give a connection string or -h/-p/-U/-d, or set DATABASE_URL or the PG* variables")
	}
	// Listen first: a bad or busy address fails before any connection is made.
	ln, err := listenHTTP(*addr, stderr)
	if err != nil {
		return err
	}
	defer ln.Close()
	mon, err := openMonitor(ctx, dsn)
	if err != nil {
		return err
	}
	defer mon.Close()

	log := slog.New(slog.NewTextHandler(stderr, nil))
	others, closeOthers, err := otherSources(ctx, lf, dsn)
	if err != nil {
		return err
	}
	defer closeOthers()
	mo := newMonitoring(mon, others, true, 2*(*interval), log)
	info := mon.Info()
	var recs []*recorder
	if *record != "" {
		w, err := createRecording(*record, newRedactor(dsn).target(), info, []string{primarySource}, *interval)
		if err != nil {
			return err
		}
		defer w.Close()
		recs = append(recs, &recorder{w: w, log: log})
	}
	hist, err := hf.open(recording.Header{Server: newRedactor(dsn).target(), Info: info, Sources: []string{primarySource}, Start: time.Now(), Interval: *interval})
	if err != nil {
		return err
	}
	if hist != nil {
		defer hist.Close()
		mo.keep(hist)
		recs = append(recs, &recorder{w: hist, log: log, what: "history"})
	}
	mo.onPoll = func(s model.Snapshot) {
		for _, r := range recs {
			r.write(0, s)
		}
	}
	if info.Warning != "" {
		fmt.Fprintln(stderr, "locktop: warning:", info.Warning)
	}
	fmt.Fprintf(stdout, "locktop serve: watching database %q as %q (PostgreSQL %s), polling every %s\n",
		info.Database, info.User, info.Version, *interval)
	for _, o := range others {
		fmt.Fprintf(stdout, "also watching %s\n", o.Name())
	}
	fmt.Fprintf(stdout, "listening on http://%s (/api/locks, /api/advisory-locks, /metrics, /healthz%s)\n", ln.Addr(), pastEndpoints(hist))

	var wg sync.WaitGroup
	pctx, stopPolling := context.WithCancel(ctx)
	wg.Go(func() { mo.loop(pctx, *interval, *waitInterval) })
	err = httpapi.ServeListener(ctx, ln, mo.handler)
	stopPolling()
	wg.Wait()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "locktop serve: stopped")
	return nil
}

// pastEndpoints lists the endpoints of the kept past, when there is one.
func pastEndpoints(h *history.History) string {
	if h == nil {
		return ""
	}
	return ", /api/locks?at=, /api/report, /api/history"
}

// listenHTTP opens the listener of --http. An address that cannot be
// listened on is exit code 2, like a server that cannot be used;
// an address reachable from other machines gets a warning, because the lock
// table shows other sessions' queries.
func listenHTTP(addr string, stderr io.Writer) (net.Listener, error) {
	ln, err := httpapi.Listen(addr)
	if err != nil {
		var ae *httpapi.AddrError
		if errors.As(err, &ae) {
			return nil, usageError{ae.Error()}
		}
		// Busy, not permitted, not an address of this machine: the
		// operator's to fix, as a bad address is.
		return nil, exitError{code: exitUsage, err: fmt.Errorf("cannot listen on %s: %w", addr, err)}
	}
	if w := exposureWarning(ln.Addr()); w != "" {
		fmt.Fprintln(stderr, "locktop: warning:", w)
	}
	return ln, nil
}

// exposureWarning is the warning an address reachable from other machines
// gets ("" for loopback), for stderr and for the dashboard's screen.
func exposureWarning(a net.Addr) string {
	if httpapi.IsLoopback(a) {
		return ""
	}
	return fmt.Sprintf("%s is reachable from other machines, and /api/advisory-locks shows other sessions' queries", a)
}

// monitoring is the HTTP surface over one monitor and the other lock
// sources (a Redis, a lease table): its metrics, the newest snapshot of
// every source merged, and the handler serving both. `locktop serve`
// builds one that polls every source itself; the dashboard's --http builds
// one whose other sources are polled by the dashboard (tee), and calls
// Poll from its own poll loop.
type monitoring struct {
	mon     *pgsource.Monitor
	met     *metrics.Metrics
	latest  *httpapi.Latest
	handler http.Handler
	log     *slog.Logger
	onPoll  func(model.Snapshot) // loop hands it every snapshot (serve --record)

	// others are the sources beside the pgsource. pollOthers: poll them
	// beside the monitor (serve); else their newest answers, put by tee,
	// are merged in (the dashboard).
	others     []source.Source
	pollOthers bool
	mu         sync.Mutex
	last       []model.Part
	hist       *history.History // the kept past, set once it is open
}

// Recording is the kept past (httpapi.Past), or history.ErrEmpty before
// the history is open.
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

// newMonitoring wires metrics, a Latest that polls by itself once its
// snapshot is older than maxAge, and the handler. The monitor's pool is
// registered for the pool metrics as "monitor"; add more with met.AddPools.
func newMonitoring(mon *pgsource.Monitor, others []source.Source, pollOthers bool, maxAge time.Duration, log *slog.Logger) *monitoring {
	mo := &monitoring{mon: mon, met: metrics.New(), log: log, others: others, pollOthers: pollOthers}
	mo.last = make([]model.Part, len(others))
	for i, o := range others {
		mo.last[i] = model.Part{Name: o.Name(), Err: errors.New("not polled yet")}
	}
	mo.met.AddPools(func() []model.PoolStats {
		return []model.PoolStats{poolstats.Of("monitor", mon.Pool(), 0)}
	})
	mo.latest = httpapi.NewLatest(mo.poll, maxAge)
	mo.handler = httpapi.New(httpapi.Deps{
		Latest:  mo.latest,
		Info:    mon.Info,
		Health:  mon.Probe,
		Metrics: mo.met.Handler(),
		Past:    mo,
		Log:     log,
	})
	return mo
}

// Poll reads the lock table once for the dashboard and publishes it, with
// the other sources' newest answers, to the metrics and the endpoints, so
// --http serves the dashboard's own polls. It returns the server's
// snapshot alone: the dashboard shows the other sources from their own
// polls.
func (mo *monitoring) Poll(ctx context.Context) (model.Snapshot, error) {
	s, err := mo.mon.Poll(ctx)
	if err != nil {
		mo.met.PollFailed()
		return s, err
	}
	mo.mu.Lock()
	parts := append([]model.Part{{Name: pgSource, Snapshot: s}}, mo.last...)
	mo.mu.Unlock()
	merged := model.Merge(parts)
	mo.met.Snapshot(merged)
	mo.latest.Put(merged)
	return s, nil
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
		return s, err
	})
}

// Info describes the server.
func (mo *monitoring) Info() model.ServerInfo { return mo.mon.Info() }

// pgSource names the PostgreSQL monitor among the source.
const pgSource = "postgres"

// poll reads every source once (the others beside the monitor, or their
// newest answers) and publishes the merged snapshot to the metrics. It
// fails when the monitor's poll fails; another source's failure is in the
// snapshot's Sources.
func (mo *monitoring) poll(ctx context.Context) (model.Snapshot, error) {
	var parts []model.Part
	if mo.pollOthers && len(mo.others) > 0 {
		all := append([]source.Source{source.Named(pgSource, mo.mon.Poll)}, mo.others...)
		parts = source.PollAll(ctx, all)
	} else {
		s, err := mo.mon.Poll(ctx)
		parts = []model.Part{{Name: pgSource, Snapshot: s, Err: err}}
		mo.mu.Lock()
		parts = append(parts, mo.last...)
		mo.mu.Unlock()
	}
	if err := parts[0].Err; err != nil {
		mo.met.PollFailed()
		return model.Snapshot{}, err
	}
	merged := model.Merge(parts)
	if len(mo.others) == 0 {
		merged.Sources = nil // one source: the snapshot is the server's, as before
	}
	mo.met.Snapshot(merged)
	return merged, nil
}

// loop polls every interval (every fast while a lock is waited for, when
// fast is shorter) until ctx ends, keeping latest and the snapshot gauges
// fresh. A failing poll is logged once, and again when it recovers.
func (mo *monitoring) loop(ctx context.Context, interval, fast time.Duration) {
	t := time.NewTimer(interval)
	defer t.Stop()
	failing := false
	for {
		begun := time.Now()
		s, err := mo.poll(ctx)
		next := interval
		if _, waiting := s.Counts(); err == nil && waiting > 0 && fast > 0 && fast < interval {
			next = fast
		}
		t.Reset(max(next-time.Since(begun), 0))
		switch {
		case err == nil:
			mo.latest.Put(s)
			if mo.onPoll != nil {
				mo.onPoll(s)
			}
			if failing {
				mo.log.Info("polling the lock table again")
				failing = false
			}
		case ctx.Err() != nil:
			return
		default:
			if mo.onPoll != nil {
				mo.onPoll(model.Outage(pgSource, err, time.Now())) // the history keeps the outage
			}
			if !failing {
				mo.log.Warn("polling the lock table failed; retrying every interval", "err", err.Error(), "interval", interval)
				failing = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
