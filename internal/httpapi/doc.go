// Package httpapi is locktop's monitoring surface over HTTP:
//
//	GET /api/advisory-locks  the lock table as JSON (Document)
//	GET /metrics             Prometheus metrics (internal/metrics)
//	GET /healthz             200 when a probe lock can be taken and released
//	                         within a second, else 503 with the reason
//
// New builds the handler from its dependencies (Deps), so the same handler
// serves `locktop serve` and the dashboard's --http. Serve, or Listen and
// ServeListener, run it on an address (DefaultAddr, loopback only, unless
// told otherwise) and shut down gracefully when the context ends: the
// listener closes at once, requests in flight get ShutdownTimeout to finish.
//
// The dashboard already polls the monitor, so it should not let HTTP clients
// poll as well: feed its snapshots into a Latest and give Latest.Snapshot to
// the handler.
//
//	latest := httpapi.NewLatest(nil, 0) // no polling of its own
//	h := httpapi.New(httpapi.Deps{
//		Snapshot: latest.Snapshot,
//		Info:     mon.Info,
//		Health:   mon.Probe,
//		Metrics:  met.Handler(),
//	})
//	go httpapi.Serve(ctx, addr, h)
//	// in the dashboard's poll loop:
//	snap, err := mon.Poll(ctx)
//	if err == nil { latest.Put(snap); met.Snapshot(snap) } else { met.PollFailed() }
package httpapi
