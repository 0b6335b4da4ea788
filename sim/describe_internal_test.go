package sim

import "testing"

// Every scenario and fault explains itself in the dashboard's pickers.
func TestScenariosAndFaultsDescribed(t *testing.T) {
	var s Sim
	for _, sc := range Scenarios() {
		if s.DescribeScenario(sc) == "" {
			t.Errorf("scenario %s has no description", sc)
		}
	}
	for _, f := range faults {
		if s.DescribeFault(f.name) == "" {
			t.Errorf("fault %s has no description", f.name)
		}
	}
}
