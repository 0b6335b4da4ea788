package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/locktop/locktop/internal/record/history"
	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// historyFlags are the flags of the history the dashboard and serve keep
// by default.
type historyFlags struct {
	dir  *string
	keep *time.Duration
	max  *string
}

func addHistoryFlags(fs *flagSet) *historyFlags {
	return &historyFlags{
		dir:  fs.String("history", "", "keep the history in rotating files in this `DIR` (default: in memory); locktop replay and report read the directory as one recording"),
		keep: fs.Duration("history-keep", history.DefaultKeep, "keep this much of the past, at least (0: no history; b rewinds the dashboard onto it)"),
		max:  fs.String("history-max", "64MiB", "and at most this `SIZE` of it (64MiB, 500MB, …)"),
	}
}

// config is the history the flags describe, for StackConfig.History: nil
// with --history-keep 0. A bad size is exit code 2.
func (f *historyFlags) config() (*history.Options, error) {
	if *f.keep == 0 {
		return nil, nil
	}
	if *f.keep < 0 {
		return nil, usagef("--history-keep %s: a duration, 0 for no history", *f.keep)
	}
	size, err := humanize.ParseBytes(*f.max)
	if err != nil || size < 1<<20 {
		return nil, usagef("--history-max %q: a size of at least 1MiB (64MiB, 500MB)", *f.max)
	}
	return &history.Options{Dir: *f.dir, Keep: *f.keep, MaxBytes: int64(size)}, nil
}

// rewindable is the dashboard's Options.History: the kept past, a copy
// at each call (nil without a history).
func rewindable(h *history.History) func() (ui.Replay, error) {
	if h == nil {
		return nil
	}
	return func() (ui.Replay, error) {
		r, err := h.Recording()
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// snapshotWriter is where a recorder writes: a recording file or a
// history.
type snapshotWriter interface {
	Write(source int, s model.Snapshot) error
}

// maxDownload bounds a history downloaded from a serve: its own bound is
// 64 MiB by default.
const maxDownload = 1 << 30

// readRecording reads what replay and report are pointed at: a recording
// file, a --history directory (one recording; torn last records skipped,
// with a warning), or a running serve or dashboard's http://HOST:PORT
// (its kept history, GET /api/history).
func readRecording(ctx context.Context, path string, stderr io.Writer) (*recording.Recording, error) {
	switch {
	case strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://"):
		data, err := download(ctx, strings.TrimSuffix(path, "/")+"/api/history")
		if err != nil {
			return nil, err
		}
		return recording.Read(data)
	case history.IsDir(path):
		r, st, err := history.Open(path)
		if err != nil {
			return nil, err
		}
		if st.Torn > 0 || st.Skipped > 0 {
			fmt.Fprintf(stderr, "locktop: warning: %s: %d of %d history files end in a torn record (skipped), %d unreadable or of another server (skipped)\n", path, st.Torn, st.Files, st.Skipped)
		}
		return r, nil
	default:
		return recording.Open(path)
	}
}

// download GETs url, or says in one line why not (the error of a serve
// carries its reason).
func download(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxDownload))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s: %s", resp.Status, e.Error)
		}
		return nil, fmt.Errorf("%s (is it a locktop serve?)", resp.Status)
	}
	return data, nil
}

// defaultWaitInterval is the refresh interval while a lock is waited for.
const defaultWaitInterval = 200 * time.Millisecond

// addWaitInterval defines --wait-interval, the dashboard's and serve's.
func addWaitInterval(fs *flagSet) *time.Duration {
	return fs.Duration("wait-interval", defaultWaitInterval, "poll this often while any lock is waited for, so short waits are seen and kept (0: always --interval)")
}

func checkWaitInterval(d time.Duration) error {
	if d != 0 && d < minInterval {
		return usagef("--wait-interval %s is too short (at least %s, or 0 for never faster)", d, minInterval)
	}
	return nil
}
