package cli

import (
	"os"
	"runtime"
)

// dashboardProcs is how many Ps (GOMAXPROCS) the dashboard's process
// runs on: one when the dashboard is all it runs, else 0 (the runtime's
// own choice). The dashboard does its work one message at a time (a
// poll's answer, then its Update and its View); with a second P idle,
// each goroutine made runnable (each of the renderer's ticks, ten a
// second, each poll and its answer) also wakes a second thread that finds
// nothing to do, and at rest those wake-ups are most of the process's CPU
// (issue 26: about 120 against 90 context switches a second, beside
// pg_activity's load). The simulator's workers and the --http endpoints
// run beside the dashboard and keep the runtime's choice, as does a
// GOMAXPROCS the operator set.
func dashboardProcs(withSim, withHTTP bool) int {
	if withSim || withHTTP || os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	return 1
}

// setDashboardProcs applies dashboardProcs.
func setDashboardProcs(withSim, withHTTP bool) {
	if n := dashboardProcs(withSim, withHTTP); n > 0 {
		runtime.GOMAXPROCS(n)
	}
}
