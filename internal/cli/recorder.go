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
	w      *recording.Writer
	log    *slog.Logger
	failed sync.Once
}

func (r *recorder) write(source int, s model.Snapshot) {
	if err := r.w.Write(source, s); err != nil {
		r.failed.Do(func() { r.log.Error("recording stopped", "err", err.Error()) })
	}
}

// recordedSource is the dashboard's Source, recorded.
type recordedSource struct {
	ui.Source
	rec *recorder
}

func (s recordedSource) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := s.Source.Poll(ctx)
	if err == nil {
		s.rec.write(0, snap)
	}
	return snap, err
}

// recordedLockSource is one more source of the dashboard, recorded as
// source i.
type recordedLockSource struct {
	source.Source
	rec *recorder
	i   int
}

func (s recordedLockSource) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := s.Source.Poll(ctx)
	if err == nil {
		s.rec.write(s.i, snap)
	}
	return snap, err
}
