// Package httpapi is locktop's monitoring surface over HTTP:
//
//	GET /api/advisory-locks  the lock table as JSON (Document)
//	GET /api/locks           every kind of lock from every source (LocksDocument);
//	                         ?at=TIME: as it was then, from the kept history
//	GET /api/report          locktop report's JSON over the kept history (?from=&to=)
//	GET /report              the same review as locktop report --html's page (?from=&to=)
//	GET /api/history         the kept history as one recording file
//	GET /metrics             Prometheus metrics (internal/metrics)
//	GET /healthz             200 when a probe lock can be taken and released
//	                         within a second, else 503 with the reason
//
// No HTTP load becomes database load: /healthz runs one probe at a time for
// every request waiting and reuses its result for DefaultHealthMaxAge (1 s);
// /api/advisory-locks is answered from a Latest, which polls at most once
// at a time, and while the database hangs answers within StaleWait (1 s)
// from the newest snapshot, marked "stale" with its "age" and the
// "stale_reason", or 503 when there is none. /metrics refuses a fifth
// concurrent scrape with 503 (internal/metrics).
//
// New builds the handler from its dependencies (Deps), so the same handler
// serves `locktop serve` and the dashboard's --http. Listen and
// ServeListener run it on an address (DefaultAddr, loopback only, unless
// told otherwise) and shut down gracefully when the context ends: the
// listener closes at once, requests in flight get ShutdownTimeout to finish.
//
// The dashboard already polls the monitor, so HTTP clients should not poll
// as well: put its snapshots into a Latest and serve from it.
//
//	met := metrics.New()
//	latest := httpapi.NewLatest(mon.Poll, 2*interval) // polls itself only when the loop falls behind
//	h := httpapi.New(httpapi.Deps{
//		Latest:   latest,
//		Info:     mon.Info,
//		Health:   mon.Probe,
//		Metrics:  met.Handler(),
//	})
//	ln, err := httpapi.Listen(addr) // before the TUI starts: a bad address is bad usage
//	...
//	go func() { errc <- httpapi.ServeListener(ctx, ln, h) }()
//	// in the poll loop:
//	if snap, err := mon.Poll(ctx); err == nil {
//		latest.Put(snap)
//		met.Snapshot(snap)
//	} else {
//		met.PollFailed("")
//	}
//
// Give met.Observer() to every lockcore.Service of the process (the
// simulator's) and register their pools with met.AddPools.
package httpapi
