package cli

import "testing"

// The dashboard alone runs on one P; beside the simulator, the --http
// endpoints or a GOMAXPROCS the operator set, on the runtime's choice.
func TestDashboardProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	for _, tc := range []struct {
		sim, http bool
		want      int
	}{{false, false, 1}, {true, false, 0}, {false, true, 0}, {true, true, 0}} {
		if got := dashboardProcs(tc.sim, tc.http); got != tc.want {
			t.Errorf("sim %v, http %v: %d Ps, want %d", tc.sim, tc.http, got, tc.want)
		}
	}
	t.Setenv("GOMAXPROCS", "4")
	if got := dashboardProcs(false, false); got != 0 {
		t.Errorf("GOMAXPROCS=4 set: %d Ps, want 0 (the operator's)", got)
	}
}
