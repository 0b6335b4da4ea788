package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/model"
)

// The default bounds: the last 30 minutes, or 64 MB, whichever is less.
const (
	DefaultKeep     = 30 * time.Minute
	DefaultMaxBytes = 64 << 20
)

// segmentsPerBound is how many segments share a bound: a segment is closed
// at an eighth of either, so dropping the oldest gives back an eighth.
const segmentsPerBound = 8

// Options configure a History.
type Options struct {
	// Dir keeps the segments as files in this directory (created if
	// missing); "" keeps them in memory.
	Dir string
	// Keep is the age bound (0: DefaultKeep); MaxBytes the size bound of
	// all segments together (0: DefaultMaxBytes).
	Keep     time.Duration
	MaxBytes int64
	// Header is every segment's header; its Start is set per segment.
	Header recording.Header
	// Now is the wall clock that ages segments (nil: time.Now).
	Now func() time.Time
}

// History is the bounded recent past of one recorder's sources. Its
// methods are safe for concurrent use.
type History struct {
	mu   sync.Mutex
	o    Options
	segs []*segment // oldest first; the last one is written to
	w    *recording.Writer
	err  error // the first write error: the history stops, the dashboard goes on
}

// segment is one recording of the history.
type segment struct {
	path    string        // its file; "" in memory
	buf     *bytes.Buffer // its bytes, in memory
	size    int64
	started time.Time // wall clock of its first write
	written time.Time // of its last
}

// New starts a history. With o.Dir, the files already there are kept as
// its oldest segments (and removed by the bounds like its own).
func New(o Options) (*History, error) {
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &History{o: o}
	if o.Dir != "" {
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		old, err := files(o.Dir)
		if err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
		for _, f := range old {
			fi, err := os.Stat(f)
			if err != nil {
				continue
			}
			h.segs = append(h.segs, &segment{path: f, size: fi.Size(), written: fi.ModTime(), started: fi.ModTime()})
		}
		h.prune(o.Now())
	}
	return h, nil
}

// Write appends source's snapshot s, first closing the segment being
// written if it is full or old enough, and dropping what the bounds no
// longer keep. After a write error the history keeps what it has and
// every later Write returns that error.
func (h *History) Write(source int, s model.Snapshot) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	now := h.o.Now()
	if h.w == nil || h.w.Size() >= h.o.MaxBytes/segmentsPerBound || now.Sub(h.segs[len(h.segs)-1].started) >= h.o.Keep/segmentsPerBound {
		if err := h.rotate(now); err != nil {
			h.err = err
			return err
		}
	}
	cur := h.segs[len(h.segs)-1]
	if err := h.w.Write(source, s); err != nil {
		h.err = fmt.Errorf("history: %w", err)
		return h.err
	}
	cur.size, cur.written = h.w.Size(), now
	h.prune(now)
	return nil
}

// rotate closes the segment being written and begins the next.
func (h *History) rotate(now time.Time) error {
	if h.w != nil {
		if err := h.w.Close(); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		h.w = nil
	}
	hd := h.o.Header
	hd.Start = now
	seg := &segment{started: now, written: now}
	var err error
	if h.o.Dir == "" {
		seg.buf = &bytes.Buffer{}
		h.w, err = recording.NewWriter(seg.buf, hd)
	} else {
		seg.path = filepath.Join(h.o.Dir, fmt.Sprintf("%s%s-%d%s", prefix, now.UTC().Format(stamp), os.Getpid(), suffix))
		h.w, err = recording.Create(seg.path, hd)
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	seg.size = h.w.Size()
	h.segs = append(h.segs, seg)
	return nil
}

// prune drops the oldest segments, never the one being written, while the
// history is over its size bound or their newest record is past its age
// bound.
func (h *History) prune(now time.Time) {
	var total int64
	for _, s := range h.segs {
		total += s.size
	}
	for len(h.segs) > 1 || (len(h.segs) == 1 && h.w == nil) {
		s := h.segs[0]
		if total <= h.o.MaxBytes && now.Sub(s.written) <= h.o.Keep {
			break
		}
		if s.path != "" {
			// A file that cannot be removed is left behind: the history
			// forgets it rather than stopping.
			_ = os.Remove(s.path)
		}
		total -= s.size
		h.segs = h.segs[1:]
	}
}

// Size is the bytes the history holds.
func (h *History) Size() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var total int64
	for _, s := range h.segs {
		total += s.size
	}
	return total
}

// Recording is the history so far as one recording, a copy that later
// writes do not change; replay, report and ?at= read it.
func (h *History) Recording() (*recording.Recording, error) {
	data, err := h.Bytes()
	if err != nil {
		return nil, err
	}
	return recording.Read(data)
}

// Bytes is the history so far as the bytes of one recording (a copy), as
// GET /api/history serves it.
//
// The lock is held only to list the segments: the files are read and the
// segments joined after it is let go, so that a reader of a large history
// never holds up Write, which the poll loop calls after every poll. An
// in-memory segment's bytes up to its current length are never written
// again (its buffer is only appended to), and a file being appended to
// while it is read ends at most in a torn record, which Concat cuts off.
func (h *History) Bytes() ([]byte, error) {
	type part struct {
		mem  []byte
		path string
	}
	h.mu.Lock()
	parts := make([]part, len(h.segs))
	for i, s := range h.segs {
		parts[i].path = s.path
		if s.buf != nil {
			parts[i].mem = s.buf.Bytes()
		}
	}
	h.mu.Unlock()
	if testHookRead != nil {
		testHookRead()
	}
	data := make([][]byte, 0, len(parts))
	for _, p := range parts {
		if p.path == "" {
			data = append(data, p.mem)
			continue
		}
		b, err := os.ReadFile(p.path)
		if err != nil {
			continue // removed behind our back: the rest still reads
		}
		data = append(data, b)
	}
	joined, _, _, err := recording.Concat(data)
	if errors.Is(err, recording.ErrNoSegment) {
		return nil, ErrEmpty
	}
	return joined, err
}

// testHookRead, when set by a test, runs in Bytes after the segments are
// listed and before they are read.
var testHookRead func()

// ErrEmpty: the history holds no segment yet (nothing was polled).
var ErrEmpty = errors.New("the history holds nothing yet")

// Close closes the segment being written. The files of a directory stay.
func (h *History) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		return nil
	}
	err := h.w.Close()
	h.w = nil
	if h.err == nil {
		h.err = errors.New("history: closed")
	}
	return err
}

// Segment files: prefix, the UTC time the segment began, the writer's pid,
// suffix; names sort in time order.
const (
	prefix = "history-"
	suffix = ".ltr"
	stamp  = "20060102T150405.000000000Z"
)

// files lists dir's segment files, oldest first.
func files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	slices.Sort(out)
	return out, nil
}

// IsDir reports whether path is a history directory (a directory holding
// segment files), which replay and report read as one recording.
func IsDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// Open reads the history directory dir as one recording. Torn last
// records (a kill -9 of the writer) are cut off; they and the segments
// that cannot be read are counted in the returned Stats.
func Open(dir string) (*recording.Recording, Stats, error) {
	var st Stats
	names, err := files(dir)
	if err != nil {
		return nil, st, err
	}
	if len(names) == 0 {
		return nil, st, fmt.Errorf("%s: no history files (%s*%s) in the directory", dir, prefix, suffix)
	}
	// Read as a stream (recording.OpenFiles): a directory of history is
	// bounded by size, but the files are not read into memory either.
	r, torn, skipped, err := recording.OpenFiles(names)
	st.Files, st.Torn, st.Skipped = len(names), torn, skipped
	if err != nil {
		return nil, st, fmt.Errorf("%s: %w", dir, err)
	}
	return r, st, nil
}

// Stats says how a history directory read.
type Stats struct {
	Files   int // segment files found
	Torn    int // of them, ending in a torn record (cut off)
	Skipped int // unreadable, or of another server or sources
}
