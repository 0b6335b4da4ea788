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
// the call of the function it returns, and its voluntary context switches
// per iteration as vcsw/op: a thread that blocked (a read that waited, a
// goroutine's thread parked or woken), which a loaded machine moves less
// than it moves times.
func PerOp(b *testing.B) func() {
	start, sw := used()
	return func() {
		if b.N > 0 {
			cpu, sw2 := used()
			b.ReportMetric(float64(cpu-start)/1e6/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(sw2-sw)/float64(b.N), "vcsw/op")
		}
	}
}

func used() (time.Duration, int64) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Nvcsw
}
