// Package benchcpu reports a benchmark's own CPU time per iteration. A
// refresh's wall time is mostly a server's answer, which a loaded machine
// stretches; the client's CPU is what the client's code decides, and it
// moves far less with the load.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// PerOp reports the process's CPU time (user and system, every thread: the
// garbage collector's too) per iteration as cpu-ms/op, from the call to
// the call of the function it returns.
func PerOp(b *testing.B) func() {
	start := used()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(used()-start)/1e6/float64(b.N), "cpu-ms/op")
		}
	}
}

func used() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
