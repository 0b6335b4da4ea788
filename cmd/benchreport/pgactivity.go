package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// restBeside: the dashboard's CPU at rest beside pg_activity's (Debian's
// pg-activity), both on the same load at once (1,000 advisory locks held,
// 20 waiting), both refreshing every second in tmux at 160×50, both
// measured in the same windows (cpuSeconds: schedstat), once
// both have settled. Budget: ≤ 0.3× pg_activity's CPU (issue 13).
//
// The dashboard runs with --wait-interval 0: with 20 waiters its default
// polls every 200 ms (adaptive polling, issue 22), five times
// pg_activity's --refresh 1, and the budget compares the two tools' cost
// for the same work, one refresh a second on the same load (issue 26).
// The defaults' cost is the at-rest row's and the adaptive polling's own.
func restBeside(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	// settle: both start, fill their screens and grow their heaps first (a
	// dashboard's first 15 s had thousands of page faults, later windows
	// hardly any: that is starting, not rest). Then rounds windows of
	// measure each, both tools in the same window.
	const settle, measure, rounds = 15 * time.Second, 10 * time.Second, 7
	pga, err := exec.LookPath("pg_activity")
	if err != nil {
		return nil, fmt.Errorf("pg_activity is not installed (apt-get install -y pg-activity): %w", err)
	}
	holder, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return nil, err
	}
	defer holder.Close(context.Background())
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(80, g) FROM generate_series(1, 1000) g"); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(r.dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := 1; i <= 20; i++ {
		wg.Go(func() { _, _ = pool.Exec(wctx, "SELECT pg_advisory_lock(80, $1::int)", i) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&n); err != nil {
			return nil, err
		}
		if n >= 20 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of the 20 advisory waiters queued", n)
		}
		time.Sleep(50 * time.Millisecond)
	}

	sock := fmt.Sprintf("locktop-beside-%d", os.Getpid())
	tmux := func(args ...string) ([]byte, error) {
		return r.cmd(ctx, "tmux", append([]string{"-L", sock}, args...)...).Output()
	}
	defer tmux("kill-server")
	// pg_activity reads PGHOST, PGPORT, PGUSER and PGDATABASE from the
	// runner's environment, which the tmux server inherits.
	cmds := map[string]string{
		"locktop":     fmt.Sprintf("exec %s --dsn '%s' --interval 1s --wait-interval 0 --log /dev/null", filepath.Join(r.root, "bin", "locktop"), r.dsn),
		"pg_activity": "exec " + pga + " --refresh 1",
	}
	for _, name := range []string{"locktop", "pg_activity"} {
		if _, err := tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "50", cmds[name]); err != nil {
			return nil, fmt.Errorf("tmux %s: %w", name, err)
		}
	}
	pids := map[string]string{}
	for name := range cmds {
		out, err := tmux("display-message", "-t", name, "-p", "#{pane_pid}")
		if err != nil {
			return nil, fmt.Errorf("%s's pane: %w", name, err)
		}
		pids[name] = strings.TrimSpace(string(out))
	}
	time.Sleep(settle)
	// Both must be showing the load, not an error or a prompt.
	for name, want := range map[string]string{"locktop": "advisory", "pg_activity": "advisory"} {
		out, err := tmux("capture-pane", "-p", "-t", name)
		if err != nil || !strings.Contains(string(out), want) {
			return nil, fmt.Errorf("%s does not show the load (%v); its screen:\n%s", name, err, out)
		}
	}
	names := [2]string{"locktop", "pg_activity"}
	var pct [2][]float64
	var ratios []float64
	for range rounds {
		var t0, t1 [2]time.Time
		var c0, c1 [2]float64
		for i, n := range names {
			if t0[i], c0[i], err = cpuSeconds(pids[n]); err != nil {
				return nil, fmt.Errorf("%s (it exited?): %w", n, err)
			}
		}
		time.Sleep(measure)
		var p [2]float64
		for i, n := range names {
			if t1[i], c1[i], err = cpuSeconds(pids[n]); err != nil {
				return nil, fmt.Errorf("%s (it exited?): %w", n, err)
			}
			p[i] = 100 * (c1[i] - c0[i]) / t1[i].Sub(t0[i]).Seconds()
			pct[i] = append(pct[i], p[i])
		}
		fmt.Fprintf(r.log, "   at rest: locktop %.2f%%, pg_activity %.2f%% of a core over %s\n", p[0], p[1], measure)
		if p[1] > 0 {
			ratios = append(ratios, p[0]/p[1])
		}
	}
	if len(ratios) == 0 {
		return nil, fmt.Errorf("pg_activity used no CPU in %d rounds of %s", rounds, measure)
	}
	ratio := median(ratios)
	window := fmt.Sprintf("%d windows of %s after %s", rounds, measure, settle)
	return []figure{{
		Name:     "Dashboard at rest beside pg_activity (1 s refresh, 1,000 held + 20 waiting advisory locks, both at once)",
		Figure:   fmt.Sprintf("%.2f%% of a core", median(pct[0])),
		Baseline: fmt.Sprintf("%.2f%% of a core (pg_activity --refresh 1)", median(pct[1])),
		Ratio:    fmt.Sprintf("%.2f× the CPU", ratio), Spread: spread(ratios), Budget: "≤ 0.3×", Verdict: verdict(ratio <= 0.3),
		Command:   "locktop --dsn DSN --interval 1s --wait-interval 0 in tmux at 160×50 (one refresh a second, as pg_activity's: the default would poll every 200 ms while locks are waited for); CPU time from /proc/PID/task/*/schedstat, " + window + " (the median; the ratio is the median of the windows' ratios)",
		Baseline2: "pg_activity --refresh 1 in tmux at 160×50, the same windows",
	}}, nil
}
