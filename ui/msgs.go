package ui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// SnapshotMsg carries one source's answer to one poll into Update: a
// snapshot, or the error that kept the poll from reading one. Source says
// whose: 0 is Options.Source, i is Options.Sources[i-1]. Each source
// answers on its own, so a refresh brings one message per source and a
// failing source never holds back the others. The dashboard's own polls
// deliver it; a caller that polls elsewhere may send it too.
type SnapshotMsg struct {
	Source   int
	Snapshot model.Snapshot
	Err      error
}

// tickMsg re-arms one source's loop; seq tells a current tick from one
// armed before the interval changed or a refresh was forced.
type tickMsg struct{ source, seq int }

// simMsg carries the simulator's status.
type simMsg struct {
	status model.SimStatus
	faults []string // the faults of the scenario running now
}

// eventsMsg is a batch of simulator events; closed reports that the
// stream ended.
type eventsMsg struct {
	events []model.Event
	closed bool
}

// actionMsg reports an action the operator took (a simulator control, a
// terminated backend): note goes to the event log and the status line; when
// err is set, fail and err go to both instead, as an error.
type actionMsg struct {
	note string
	fail string // what a failure says ("could not terminate backend 42"); default note + " failed"
	err  error
	// terminated is the backend the action terminated, when it did: its
	// rows' end then reads as such, not as a release.
	terminated int32
}

// simCmd reads the simulator's status.
func simCmd(sim Simulator) tea.Cmd {
	return func() tea.Msg { return simMsg{status: sim.Status(), faults: sim.Faults()} }
}

// action runs fn in a command and reports it as an actionMsg.
func action(note string, fn func() error) tea.Cmd {
	return func() tea.Msg { return actionMsg{note: note, err: fn()} }
}

// outcome runs fn in a command and reports what it says it did.
func outcome(fn func() (note string, err error)) tea.Cmd {
	return func() tea.Msg {
		note, err := fn()
		return actionMsg{note: note, err: err}
	}
}

// Event batching: a busy simulator sends thousands of events a second; the
// dashboard takes them in batches of at most eventBatch, gathered for at
// most eventWindow, so it redraws for them about ten times a second.
const (
	eventBatch  = 256
	eventWindow = 100 * time.Millisecond
)

// waitEvents waits for the next simulator events. It returns nil when ctx
// ends, so the command never outlives the dashboard.
func waitEvents(ctx context.Context, ch <-chan model.Event) tea.Cmd {
	return func() tea.Msg {
		var batch []model.Event
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-ch:
			if !ok {
				return eventsMsg{closed: true}
			}
			batch = append(batch, e)
		}
		window := time.NewTimer(eventWindow)
		defer window.Stop()
		for len(batch) < eventBatch {
			select {
			case <-ctx.Done():
				return eventsMsg{events: batch}
			case <-window.C:
				return eventsMsg{events: batch}
			case e, ok := <-ch:
				if !ok {
					return eventsMsg{events: batch, closed: true}
				}
				batch = append(batch, e)
			}
		}
		return eventsMsg{events: batch}
	}
}
