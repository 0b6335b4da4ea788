package main

import (
	"context"
	"fmt"
	"time"
)

// orderCheck measures the lock family's order check (issue 24): an
// acquire's check with four locks of other classes held and every edge
// known, the cost every nested acquire pays, beside the floor, pushing the
// held entry with no check at all. Budget: ≤ 1 µs per acquire. The figure
// is min-ns/op, the fastest burst of 256 acquires, which stays near the
// quiet machine's figure when ns/op swings with other work.
func orderCheck(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var held, floor, ratio []float64
	var cmds [2]string
	for range r.rounds {
		h, c0, err := r.goBenchMetrics(ctx, "lockcore", "^BenchmarkOrderCheckHeld4$", "200000x")
		if err != nil {
			return nil, err
		}
		f, c1, err := r.goBenchMetrics(ctx, "lockcore", "^BenchmarkOrderCheckFloor$", "200000x")
		if err != nil {
			return nil, err
		}
		cmds = [2]string{c0, c1}
		held, floor, ratio = append(held, h["min-ns/op"]), append(floor, f["min-ns/op"]), append(ratio, h["min-ns/op"]/f["min-ns/op"])
	}
	ns := func(v []float64) string { return fmt.Sprintf("%.0f ns", median(v)) }
	return []figure{{
		Name:     "Lock-order check per acquire, 4 locks held, every edge known (fastest burst of 256)",
		Figure:   ns(held),
		Baseline: ns(floor) + " (the held set's push, no check)", Ratio: fmt.Sprintf("%.2f× the time", median(ratio)), Spread: spread(ratio),
		Budget: "≤ 1 µs", Verdict: verdict(median(held) <= 1000), Command: cmds[0], Baseline2: cmds[1],
	}}, nil
}
