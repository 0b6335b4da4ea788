package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
)

// history: what keeping the history costs, and what adaptive polling
// catches.
//
//   - the bytes an hour of history takes at 1,000 held advisory locks,
//     unchanged and with 10% of the holders changing every second, and what
//     the history holds (bytes, and the heap it adds) at its default bound
//     after 30 minutes (internal/record/history's BenchmarkHistory, a
//     synthetic server). Budgets as for recordings: 10 and 100 MB/h;
//   - the share of short waits (0.3 s, 1 s, 3 s, injected one at a time at
//     random moments on the throw-away server) that a poller sees at a fixed
//     1 s interval and with adaptive polling (1 s at rest, 200 ms while any
//     lock is waited for), both polling the same waits side by side, and
//     their statements per minute at rest;
//   - the dashboard's CPU at rest with its defaults (history kept, adaptive
//     polling) and with both off (--history-keep 0 --wait-interval 0),
//     alternating.
func history(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var figs []figure
	for _, tc := range []struct{ sub, what string }{
		{"unchanged", "1,000 held locks, unchanged"},
		{"churn10pct", "1,000 held locks, 10% changing every second"},
	} {
		m, cmdline, err := r.goBenchMetrics(ctx, "internal/record/history", "^BenchmarkHistory$/^"+tc.sub+"$", "1x")
		if err != nil {
			return nil, err
		}
		budget := 10.0
		if tc.sub != "unchanged" {
			budget = 100
		}
		figs = append(figs, figure{
			Name:   "History size, " + tc.what + ", a snapshot a second",
			Figure: fmt.Sprintf("%.2f MB/hour; at the default bound after 30 min: %.2f MB kept, %.1f MB of heap added", m["MB/h"], m["MB-kept"], m["MB-heap"]),
			Budget: fmt.Sprintf("≤ %.0f MB/hour", budget), Baseline: "—", Ratio: "—", Verdict: verdict(m["MB/h"] <= budget), Command: cmdline,
		})
	}
	capture, err := shortWaits(ctx, r)
	if err != nil {
		return nil, err
	}
	figs = append(figs, capture...)
	var on, off []float64
	for range r.rounds {
		for _, mode := range []struct {
			args []string
			into *[]float64
		}{{nil, &on}, {[]string{"--history-keep", "0", "--wait-interval", "0"}, &off}} {
			pct, err := restCPU(ctx, r, mode.args...)
			if err != nil {
				return nil, err
			}
			*mode.into = append(*mode.into, pct)
		}
	}
	figs = append(figs, figure{
		Name:     "Dashboard at rest with history and adaptive polling (defaults), against both off",
		Figure:   fmt.Sprintf("%.2f%% of a core", median(on)),
		Baseline: fmt.Sprintf("%.2f%% of a core (--history-keep 0 --wait-interval 0)", median(off)),
		Ratio:    "—", Budget: "unchanged within noise", Verdict: "—",
		Command: fmt.Sprintf("locktop --dsn DSN --interval 1s [--history-keep 0 --wait-interval 0] in tmux at 160×50, 10 locks held; CPU time (schedstat) over 30 s; median of %d alternating rounds", r.rounds),
	})
	return figs, nil
}

// waitsPerLength is how many waits of each length the capture injects.
const waitsPerLength = 8

// shortWaits injects waits of 0.3 s, 1 s and 3 s in random order, at
// random moments, while two pollers watch: one every second, one adaptive.
func shortWaits(ctx context.Context, r *runner) ([]figure, error) {
	lengths := []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second}
	type poller struct {
		name  string
		fast  time.Duration
		mu    sync.Mutex
		seen  map[int32]bool // waiter pids seen waiting
		polls int
	}
	pollers := []*poller{{name: "fixed 1 s"}, {name: "adaptive 1 s / 200 ms", fast: 200 * time.Millisecond}}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, len(pollers))
	for _, p := range pollers {
		p.seen = map[int32]bool{}
		conn, err := pgx.Connect(ctx, r.dsn)
		if err != nil {
			return nil, err
		}
		defer conn.Close(ctx)
		wg.Go(func() {
			for {
				begun := time.Now()
				snap, err := pgsource.Inspect(pctx, conn)
				if pctx.Err() != nil {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				next := time.Second
				p.mu.Lock()
				p.polls++
				for _, l := range snap.Locks {
					if !l.Granted {
						p.seen[l.PID] = true
						if p.fast > 0 {
							next = p.fast
						}
					}
				}
				p.mu.Unlock()
				select {
				case <-pctx.Done():
					return
				case <-time.After(max(next-time.Since(begun), 0)):
				}
			}
		})
	}
	// At rest: statements per minute.
	const rest = 20 * time.Second
	time.Sleep(rest)
	atRest := make([]int, len(pollers))
	for i, p := range pollers {
		p.mu.Lock()
		atRest[i] = p.polls
		p.mu.Unlock()
	}

	holder, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return nil, err
	}
	defer holder.Close(ctx)
	waiter, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return nil, err
	}
	defer waiter.Close(ctx)
	var waiterPID int32
	if err := waiter.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&waiterPID); err != nil {
		return nil, err
	}
	var plan []time.Duration
	for _, d := range lengths {
		for range waitsPerLength {
			plan = append(plan, d)
		}
	}
	rng := rand.New(rand.NewPCG(22, 7))
	rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	caught := map[time.Duration][]int{} // per length, per poller
	for i, d := range plan {
		for _, p := range pollers {
			p.mu.Lock()
			delete(p.seen, waiterPID)
			p.mu.Unlock()
		}
		// A random moment: the waits must not keep step with the polls.
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(77, $1)", i); err != nil {
			return nil, err
		}
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Exec(ctx, "SELECT pg_advisory_lock(77, $1)", i)
			if err == nil {
				_, err = waiter.Exec(ctx, "SELECT pg_advisory_unlock(77, $1)", i)
			}
			done <- err
		}()
		time.Sleep(d) // the wait's length, which is what is measured
		if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock(77, $1)", i); err != nil {
			return nil, err
		}
		if err := <-done; err != nil {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond) // a poll in flight lands
		if caught[d] == nil {
			caught[d] = make([]int, len(pollers))
		}
		for j, p := range pollers {
			p.mu.Lock()
			if p.seen[waiterPID] {
				caught[d][j]++
			}
			p.mu.Unlock()
		}
	}
	stop()
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	var figs []figure
	for _, d := range lengths {
		var parts []string
		for j, p := range pollers {
			parts = append(parts, fmt.Sprintf("%s: %d/%d (%.0f%%)", p.name, caught[d][j], waitsPerLength, 100*float64(caught[d][j])/waitsPerLength))
		}
		fmt.Fprintf(r.log, "   %v waits caught: %s\n", d, strings.Join(parts, ", "))
		figs = append(figs, figure{
			Name:   fmt.Sprintf("Short waits of %v caught (%d injected at random moments)", d, waitsPerLength),
			Figure: parts[1], Baseline: parts[0], Ratio: "—", Budget: "—", Verdict: "—",
			Command: "go run ./cmd/benchreport -only history (shortWaits: pgsource.Inspect polled by both pollers side by side)",
		})
	}
	per := func(n int) float64 { return float64(n) / rest.Minutes() }
	figs = append(figs, figure{
		Name:     "Statements per minute at rest (one per poll)",
		Figure:   fmt.Sprintf("adaptive: %.0f/min", per(atRest[1])),
		Baseline: fmt.Sprintf("fixed 1 s: %.0f/min", per(atRest[0])),
		Ratio:    fmt.Sprintf("%.2f×", float64(atRest[1])/float64(max(atRest[0], 1))), Budget: "unchanged", Verdict: verdict(atRest[1] <= atRest[0]+1),
		Command: fmt.Sprintf("polls of each poller over %s with no lock waited for", rest),
	})
	return figs, nil
}

// restCPU is the dashboard's CPU at rest, in % of a core, with args added
// to its command line: locktop --dsn in tmux, 10 locks held, nothing
// changing, measured over 30 s after 5 s to settle.
func restCPU(ctx context.Context, r *runner, args ...string) (float64, error) {
	const settle, measure = 5 * time.Second, 30 * time.Second
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(1, g) FROM generate_series(1, 10) g"); err != nil {
		return 0, err
	}
	sock := fmt.Sprintf("locktop-bench-h-%d", time.Now().UnixNano())
	tmux := func(a ...string) ([]byte, error) {
		return r.cmd(ctx, "tmux", append([]string{"-L", sock}, a...)...).Output()
	}
	cmdline := fmt.Sprintf("exec %s --dsn '%s' --interval 1s --log /dev/null %s", filepath.Join(r.root, "bin", "locktop"), r.dsn, strings.Join(args, " "))
	if _, err := tmux("new-session", "-d", "-x", "160", "-y", "50", cmdline); err != nil {
		return 0, fmt.Errorf("tmux: %w", err)
	}
	defer tmux("kill-server")
	out, err := tmux("display-message", "-p", "#{pane_pid}")
	if err != nil {
		return 0, err
	}
	pid := strings.TrimSpace(string(out))
	time.Sleep(settle)
	t0, c0, err := cpuSeconds(pid)
	if err != nil {
		return 0, err
	}
	time.Sleep(measure)
	t1, c1, err := cpuSeconds(pid)
	if err != nil {
		return 0, err
	}
	pct := 100 * (c1 - c0) / t1.Sub(t0).Seconds()
	fmt.Fprintf(r.log, "   dashboard at rest %v: %.2f%% of a core\n", args, pct)
	return pct, nil
}
