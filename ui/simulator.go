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
	// for faster, 0.8 for slower).
	ScaleRates(factor float64)
	// SetLocks turns the locks on or off (off shows the races).
	SetLocks(on bool)
	// Faults lists the fault names InjectFault accepts.
	Faults() []string
	// InjectFault injects the named fault once.
	InjectFault(name string) error
	// Events is the stream of things that happen (acquired after a wait,
	// skipped, timed out, refused, phantom cleaned, invariant broken). The
	// simulator drops events rather than block when the reader is slow.
	Events() <-chan model.Event
}
