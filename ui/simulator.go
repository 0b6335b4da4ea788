package ui

import "github.com/locktop/locktop/model"

// Simulator is what the dashboard needs of a running simulator; *sim.Sim
// satisfies it. Every method must be safe to call from any goroutine and
// return quickly (the UI calls them from commands, not from Update).
type Simulator interface {
	// Status returns the simulator's current state.
	Status() model.SimStatus
	// Scenarios lists the scenario names SetScenario accepts.
	Scenarios() []string
	// SetScenario switches to the named scenario.
	SetScenario(name string) error
	// ScaleRates multiplies every rate of the scenario by factor (e.g. 1.25
	// for faster, 0.8 for slower) and returns how many rates it changed: a
	// rate without a limit (0) stays without one.
	ScaleRates(factor float64) int
	// ScaleWorkers multiplies the goroutines of every worker kind by factor
	// (from the scenario's own numbers, so opposite factors cancel out;
	// rounded, never none), adding or removing workers while they run, and
	// returns how many there are now.
	ScaleWorkers(factor float64) int
	// ToggleLocks turns the locks off if they are on and on if they are off
	// (off shows the races), and returns the new state. Two toggles cancel
	// out whichever runs first, so quick presses never depend on what the
	// screen showed.
	ToggleLocks() bool
	// Faults lists the fault names InjectFault accepts.
	Faults() []string
	// InjectFault injects the named fault once.
	InjectFault(name string) error
	// Events is the stream of things that happen (acquired after a wait,
	// skipped, timed out, refused, phantom cleaned, invariant broken). The
	// simulator drops events rather than block when the reader is slow.
	Events() <-chan model.Event
}

// Describer is what a simulator may say of its scenarios and faults, one
// line each: what it runs, and what to watch for. The pickers show it
// under the list; *sim.Sim has it.
type Describer interface {
	DescribeScenario(name string) string
	DescribeFault(name string) string
}
