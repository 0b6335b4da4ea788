package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// primarySource is the name the dashboard gives Options.Source, and a
// recording gives its source 0.
const primarySource = "PostgreSQL"

// createRecording creates the recording file path for the sources named,
// or one line saying why it cannot (it exists, its directory does not):
// exit code 2, the operator's to fix.
func createRecording(path, server string, info model.ServerInfo, sources []string, interval time.Duration, qt querytext.Mode) (*recording.Writer, error) {
	w, err := recording.Create(path, recording.Header{
		Server: server, Info: info, Sources: sources, Start: time.Now(), Interval: interval, Locktop: versionString(),
		QueryText: qt.String(),
	})
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, exitError{code: exitUsage, err: fmt.Errorf("--record/--out %s: the file exists; a recording is never overwritten", path)}
		}
		return nil, exitError{code: exitUsage, err: fmt.Errorf("--record/--out: %w", err)}
	}
	return w, nil
}

// recorder writes every snapshot a source answers to a recording. A write
// that fails is logged once, and the source goes on answering: the screen
// or the endpoints matter more than the file.
type recorder struct {
	w      snapshotWriter
	what   string // "recording" (the default) or "history", for the log
	log    *slog.Logger
	failed sync.Once
}

func (r *recorder) write(source int, s model.Snapshot) {
	if err := r.w.Write(source, s); err != nil {
		what := r.what
		if what == "" {
			what = "recording"
		}
		r.failed.Do(func() { r.log.Error(what+" stopped", "err", err.Error()) })
	}
}

// recordedSource is the dashboard's Source, recorded.
type recordedSource struct {
	ui.Source
	rec  *recorder
	name string // the source's name in an outage record
}

func (s recordedSource) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := s.Source.Poll(ctx)
	switch {
	case err == nil:
		s.rec.write(0, snap)
	case ctx.Err() == nil:
		s.rec.write(0, model.Outage(s.name, err, time.Now())) // replay shows the outage
	}
	return snap, err
}

// recordedOther is one of the sources beside the server, recorded as
// source i.
type recordedOther struct {
	source.Source
	rec *recorder
	i   int
}

// Present is the wrapped source's (source.Present): recording a source
// does not change whether it is there.
func (s recordedOther) Present(ctx context.Context) bool { return source.Present(ctx, s.Source) }

func (s recordedOther) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := s.Source.Poll(ctx)
	switch {
	case err == nil:
		s.rec.write(s.i, snap)
	case ctx.Err() == nil:
		s.rec.write(s.i, model.Outage(s.Name(), err, time.Now()))
	}
	return snap, err
}
