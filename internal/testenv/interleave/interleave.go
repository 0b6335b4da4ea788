// Package interleave times a library's operation against its pinned
// reference (the same commands sent bare) in one benchmark loop. Two
// benchmarks run one after the other differ by how the load of a shared
// machine moved between them, which on these machines is more than a
// library's share of a cycle; run in turn in one loop, each first in every
// other iteration, both bear the same load.
package interleave

import (
	"testing"
	"time"
)

// Pair runs lib and bare in turn once per iteration of b, each first in
// every other iteration, and reports their mean times (lib-ns/cycle,
// bare-ns/cycle) and their ratio (lib/bare): what the library adds over
// the bare commands. Both should be warm (connections open, statements
// prepared) before the call.
func Pair(b *testing.B, lib, bare func()) {
	var inLib, inBare time.Duration
	n := 0
	for b.Loop() {
		first, second, inFirst, inSecond := lib, bare, &inLib, &inBare
		if n%2 == 1 {
			first, second, inFirst, inSecond = bare, lib, &inBare, &inLib
		}
		start := time.Now()
		first()
		mid := time.Now()
		second()
		*inFirst += mid.Sub(start)
		*inSecond += time.Since(mid)
		n++
	}
	if n == 0 || inBare == 0 {
		return
	}
	b.ReportMetric(float64(inLib.Nanoseconds())/float64(n), "lib-ns/cycle")
	b.ReportMetric(float64(inBare.Nanoseconds())/float64(n), "bare-ns/cycle")
	b.ReportMetric(float64(inLib)/float64(inBare), "lib/bare")
}
