package workers

import (
	"context"
	"errors"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// classify turns a workload's error into an outcome, for every lock kind
// of the family: each kind's errors match lockcore's sentinels, so one
// table covers them all. It is the one table of outcomes in workers
// (lockcore's events classify its own).
func classify(ctx context.Context, err error) model.Outcome {
	switch {
	case errors.Is(err, lockcore.ErrTimeout):
		return model.OutcomeTimeout
	case errors.Is(err, lockcore.ErrLocked):
		return model.OutcomeSkipped
	case errors.Is(err, lockcore.ErrReentrant):
		return model.OutcomeReentrant
	case errors.Is(err, lockcore.ErrLost), errors.Is(err, ErrFenced), errors.Is(err, lockcore.ErrNotHeld):
		return model.OutcomeLost
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return model.OutcomeCanceled
	}
	return model.OutcomeError
}

// Loss describes a critical section whose lock was lost while it ran: what
// it did after the loss. Exactly one of the three ends applies:
//
//   - Refused > 0: the fence refused a write (or the entry): a newer holder
//     had entered, and the stale section wrote nothing after it;
//   - Stopped: the loss cancelled the body's context and the body stopped
//     at its next statement or pause, before writing again;
//   - neither: the body ran to its end and the loss showed at release. Its
//     writes (Writes) were each accepted under its fence, that is before
//     any newer holder entered; with Fence 0 nothing guarded them.
type Loss struct {
	Fence   int64  // the lock's fence; 0: unfenced
	PID     uint32 // the backend that held the lock
	Writes  int64  // fenced writes accepted
	Refused int64  // fenced writes (or the entry) refused
	Stopped bool   // the body ended because the loss cancelled it
}

// Aborted reports whether the section stopped writing because of the loss:
// a write refused by the fence, or stopped by the cancel.
func (l *Loss) Aborted() bool { return l.Refused > 0 || l.Stopped }
