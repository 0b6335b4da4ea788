package ui

import (
	"context"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/locktop/locktop/model"
)

// SnapshotMsg carries one poll's result into Update: a snapshot, or the
// error that kept the poll from reading one. The dashboard's own polls
// deliver it; a caller that polls elsewhere may send it too.
type SnapshotMsg struct {
	Snapshot model.Snapshot
	Err      error
}

// tickMsg re-arms the polling loop; seq tells a current tick from one
// armed before the interval changed or a refresh was forced.
type tickMsg struct{ seq int }

// simMsg carries the simulator's status.
type simMsg struct {
	status model.SimStatus
}

// eventsMsg is a batch of simulator events; closed reports that the
// stream ended.
type eventsMsg struct {
	events []model.Event
	closed bool
}

// actionMsg reports an action the operator took (a simulator control, a
// terminated backend): note goes to the event log, err to the status line.
type actionMsg struct {
	note string
	err  error
}

// pollTimeout bounds one poll, on top of the monitor's own
// statement_timeout, so a dead network never hangs the loop.
const pollTimeout = 10 * time.Second

// pollCmd reads one snapshot from src.
func pollCmd(ctx context.Context, src Source) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, pollTimeout)
		defer cancel()
		snap, err := src.Poll(ctx)
		return SnapshotMsg{Snapshot: snap, Err: err}
	}
}

// simCmd reads the simulator's status.
func simCmd(sim Simulator) tea.Cmd {
	return func() tea.Msg { return simMsg{status: sim.Status()} }
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
