package main

import (
	"context"
	"fmt"
	"time"
)

// recordingSize: the bytes an hour of recording takes at 1,000 held
// advisory locks, one snapshot a second, unchanged and with 10% of the
// holders changing every second (internal/recording's BenchmarkSize, a
// synthetic server: the size depends on the locks, not on how they were
// read). Budgets: 10 MB/h and 100 MB/h.
func recordingSize(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var figs []figure
	for _, tc := range []struct {
		sub, what string
		budget    float64
	}{
		{"unchanged", "1,000 held locks, unchanged", 10},
		{"churn10pct", "1,000 held locks, 10% changing every second", 100},
	} {
		m, cmdline, err := r.goBenchMetrics(ctx, "internal/record/recording", "^BenchmarkSize$/^"+tc.sub+"$", "1x")
		if err != nil {
			return nil, err
		}
		mb := m["MB/h"]
		figs = append(figs, figure{
			Name:     "Recording size, " + tc.what + ", a snapshot a second",
			Figure:   fmt.Sprintf("%.2f MB/hour (%.2f ms to encode and write a snapshot)", mb, m["ms/snapshot"]),
			Baseline: "—", Ratio: "—", Budget: fmt.Sprintf("≤ %.0f MB/hour", tc.budget), Verdict: verdict(mb <= tc.budget), Command: cmdline,
		})
	}
	return figs, nil
}
