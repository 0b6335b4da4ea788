package main

import "fmt"

// clientCPU gathers, round by round, the CPU and the voluntary context
// switches per operation of a library's benchmark, of its pinned reference
// (the same commands sent bare by the same Go client) and of the C
// baseline (pgbench, redis-benchmark). Where the bare Go loop already
// spends a multiple of the baseline's CPU, a budget against the baseline's
// time or rate is the Go runtime's to meet, not the library's.
type clientCPU struct {
	lib, ref, base, ratios, refRatios []float64 // CPU in ns per operation
	libSw, refSw, baseSw              []float64 // voluntary context switches per operation
}

// add records one round: the two Go benchmarks (their cpu-ms/op and
// vcsw/op, from benchcpu) and the baseline's CPU (ns) and switches per
// operation.
func (c *clientCPU) add(lib, ref benchResult, baseCPU, baseSw float64) {
	l, f := lib.metrics["cpu-ms/op"]*1e6, ref.metrics["cpu-ms/op"]*1e6
	c.lib, c.ref, c.base = append(c.lib, l), append(c.ref, f), append(c.base, baseCPU)
	c.libSw, c.refSw, c.baseSw = append(c.libSw, lib.metrics["vcsw/op"]), append(c.refSw, ref.metrics["vcsw/op"]), append(c.baseSw, baseSw)
	if baseCPU > 0 {
		c.ratios, c.refRatios = append(c.ratios, l/baseCPU), append(c.refRatios, f/baseCPU)
	}
}

// figure is the row of the clients' CPU: the library's (named lib) and
// its bare loop's beside the baseline's (named base), as multiples of the
// baseline's.
func (c *clientCPU) figure(name, lib, base, gocmd, basecmd string) figure {
	return figure{
		Name: name,
		Figure: fmt.Sprintf("%s %.1f µs, %.1f switches; bare loop %.1f µs, %.1f switches",
			lib, median(c.lib)/1e3, median(c.libSw), median(c.ref)/1e3, median(c.refSw)),
		Baseline: fmt.Sprintf("%s %.1f µs, %.1f switches", base, median(c.base)/1e3, median(c.baseSw)),
		Ratio:    fmt.Sprintf("%.2f× (bare loop %.2f×) the CPU", median(c.ratios), median(c.refRatios)),
		Spread:   spread(c.ratios), Budget: "—", Verdict: "—", Command: gocmd, Baseline2: basecmd,
	}
}
