package main

import (
	"context"
	"fmt"
	"time"
)

// htmlReport: the HTML report of an hour of 1,000 held locks, a tenth of
// them changing hands every second and every tenth key with a waiter
// before each hand-over (internal/record/htmlreport's BenchmarkHourReport,
// a synthetic recording): the page's size, the time to render it from the
// recording, and the time headless Chromium takes to open it. Budgets:
// under 5 MB, open in under 2 s.
func htmlReport(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	m, cmdline, err := r.goBenchMetrics(ctx, "internal/record/htmlreport", "^BenchmarkHourReport$", "1x")
	if err != nil {
		return nil, err
	}
	mb, load := m["MB"], m["ms/load"]
	return []figure{{
		Name:     "HTML report (report --html) of an hour of 1,000 held locks, 10% changing hands every second",
		Figure:   fmt.Sprintf("%.2f MB, rendered in %.1f s, opened by headless Chromium in %.0f ms", mb, m["s/render"], load),
		Baseline: "—", Ratio: "—", Budget: "< 5 MB, opens in < 2 s", Verdict: verdict(mb < 5 && load < 2000), Command: cmdline,
	}}, nil
}
