package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// loss: how long a holder takes to learn that its lock is lost, from a
// terminated backend (pg_terminate_backend from another session, once per
// kill) and from a server restart (a fast shutdown, 20 locks held, on a
// cluster of the benchmark's own) to the lock's Done closing. Budget: p99
// within 100 ms for both.
func loss(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var figs []figure
	for _, tc := range []struct {
		name, bench string
		ops         int
		what        func(n int) string
	}{
		{"terminated backend", "^BenchmarkLossTerminate$", 300, func(n int) string { return fmt.Sprintf("%d kills", n) }},
		{"server restart", "^BenchmarkLossRestart$", 10, func(n int) string { return fmt.Sprintf("%d restarts × 20 locks", n/20) }},
	} {
		m, cmdline, err := r.goBenchMetrics(ctx, "lockcore", tc.bench, fmt.Sprintf("%dx", tc.ops))
		if err != nil {
			return nil, err
		}
		p99 := m["p99-ms"]
		figs = append(figs, figure{
			Name:     fmt.Sprintf("Loss detection, %s (%s): death to the holder's cancel", tc.name, tc.what(int(m["losses"]))),
			Figure:   fmt.Sprintf("p50 %.1f ms, p99 %.1f ms, max %.1f ms", m["p50-ms"], p99, m["max-ms"]),
			Baseline: "—", Ratio: "—", Budget: "p99 ≤ 100 ms", Verdict: verdict(p99 <= 100), Command: cmdline,
		})
	}
	return figs, nil
}

// goBenchMetrics runs one benchmark of a test binary for a fixed count of
// ops and returns the metrics it reports (unit -> value).
func (r *runner) goBenchMetrics(ctx context.Context, pkg, pattern, benchtime string) (map[string]float64, string, error) {
	args := []string{"-test.run", "^$", "-test.bench", pattern, "-test.benchtime", benchtime, "-test.count", "1"}
	c := r.cmd(ctx, filepath.Join(r.bin, testBinary(pkg)), args...)
	c.Dir = filepath.Join(r.root, pkg)
	outb, err := c.Output()
	if err != nil {
		return nil, "", fmt.Errorf("%s %s: %w\n%s", pkg, pattern, err, outb)
	}
	for _, line := range strings.Split(string(outb), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 { // after the name and the op count: value unit pairs
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				m[f[i+1]] = v
			}
		}
		fmt.Fprintln(r.log, "  ", strings.Join(f, " "))
		return m, fmt.Sprintf("go test ./%s -run '^$' -bench '%s' -benchtime %s", pkg, pattern, benchtime), nil
	}
	return nil, "", fmt.Errorf("%s %s: no benchmark line in output:\n%s", pkg, pattern, outb)
}
