package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/locktop/locktop/model"
)

// Source is one place locks come from. Poll reads it once: its locks with
// their Kind set, ordered as model.Snapshot orders them, Taken by the
// source's own clock. Its error is shown as it is: one line, no password.
// A Source must be safe to poll from one goroutine at a time; the
// dashboard takes them as they are (ui.Options.Sources).
type Source interface {
	Name() string
	Poll(ctx context.Context) (model.Snapshot, error)
}

// DefaultTimeout bounds one poll of a source that sets no timeout of its
// own (WithTimeout): a source that hangs must not hold back the others.
const DefaultTimeout = 5 * time.Second

// PollFunc is a poll, as *pgsource.Monitor's Poll method is.
type PollFunc func(ctx context.Context) (model.Snapshot, error)

type named struct {
	name string
	poll PollFunc
}

func (n named) Name() string                                     { return n.name }
func (n named) Poll(ctx context.Context) (model.Snapshot, error) { return n.poll(ctx) }

// Named makes a Source of a poll function: Named("postgres", mon.Poll).
func Named(name string, poll PollFunc) Source { return named{name, poll} }

// TimeoutError is a source's poll that did not answer within its timeout.
type TimeoutError struct {
	Source  string
	Timeout time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s did not answer within %s", e.Source, e.Timeout)
}

type timed struct {
	Source
	d time.Duration
}

// WithTimeout bounds each poll of src by d: past it the poll's context is
// cancelled and Poll returns a *TimeoutError at once, even when the source
// does not heed its context.
func WithTimeout(src Source, d time.Duration) Source { return timed{src, d} }

func (t timed) Poll(ctx context.Context) (model.Snapshot, error) {
	return pollBounded(ctx, t.Source, t.d)
}

// pollBounded polls src with a deadline d, returning when the deadline
// passes whether or not the poll has (the poll goes on in its goroutine
// until it heeds its cancelled context).
func pollBounded(ctx context.Context, src Source, d time.Duration) (model.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	type answer struct {
		s   model.Snapshot
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		s, err := src.Poll(ctx)
		ch <- answer{s, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil && errors.Is(a.err, context.DeadlineExceeded) && ctx.Err() != nil {
			return model.Snapshot{}, &TimeoutError{src.Name(), d}
		}
		return a.s, a.err
	case <-ctx.Done():
		if ctx.Err() == context.DeadlineExceeded {
			return model.Snapshot{}, &TimeoutError{src.Name(), d}
		}
		return model.Snapshot{}, ctx.Err()
	}
}

// PollAll polls every source at once, each bounded by its own timeout
// (WithTimeout) or else DefaultTimeout, and returns their answers in
// order, for model.Merge. It returns when every source has answered or
// timed out; one source's failure does not affect the others'.
func PollAll(ctx context.Context, srcs []Source) []model.Part {
	parts := make([]model.Part, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		parts[i].Name = src.Name()
		wg.Go(func() {
			var s model.Snapshot
			var err error
			if _, ok := src.(timed); ok {
				s, err = src.Poll(ctx)
			} else {
				s, err = pollBounded(ctx, src, DefaultTimeout)
			}
			if err != nil {
				err = oneLine{err}
			}
			parts[i].Snapshot, parts[i].Err = s, err
		})
	}
	wg.Wait()
	return parts
}

// oneLine is an error whose text is one line, as the screen and the API
// show errors; errors.Is and As see the error it wraps.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }
func (e oneLine) Unwrap() error { return e.err }
