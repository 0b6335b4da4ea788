package recording

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/model"
)

// DefaultKeyframeEvery is Header.KeyframeEvery when it is not set: at one
// snapshot a second, a keyframe every two minutes, so a seek decodes at most
// 119 deltas after a keyframe.
const DefaultKeyframeEvery = 120

// Writer appends snapshots to a recording. Its methods are safe for
// concurrent use: each source's poll loop writes its own snapshots.
//
// Each record is written with one write call as soon as it is encoded, so a
// crash of the recording process loses at most the record being written
// (the reader skips a torn last record). The file is synced to disk after
// every keyframe and on Close, so a crash of the machine loses at most the
// records since the last keyframe of each source.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	f      *os.File // nil when writing to another io.Writer
	enc    *zstd.Encoder
	h      Header
	qt     querytext.Mode // h.QueryText
	states map[int]*writeState
	size   int64
	err    error // the first write error; every later Write returns it
}

type writeState struct {
	seq      uint64       // the next record's
	sinceKey int          // records since the last keyframe
	prev     []string     // the locks of the source's last record, as stored
	last     []model.Lock // and as they were (a copy), to reuse prev's bytes
}

// Create creates the file path (it must not exist: a recording is never
// overwritten) and writes h to it. h.KeyframeEvery defaults to
// DefaultKeyframeEvery.
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(f, h)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	w.f = f
	return w, nil
}

// NewWriter writes a recording to w, which Close does not close.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if h.KeyframeEvery <= 0 {
		h.KeyframeEvery = DefaultKeyframeEvery
	}
	if len(h.Sources) == 0 {
		return nil, errors.New("recording: a header names at least one source")
	}
	qt := querytext.Full
	if h.QueryText != "" {
		var err error
		if qt, err = querytext.ParseMode(h.QueryText); err != nil {
			return nil, fmt.Errorf("recording: %w", err)
		}
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	b, err := encodeHeader(h)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return &Writer{w: w, enc: enc, h: h, qt: qt, states: map[int]*writeState{}, size: int64(len(b))}, nil
}

// Header is the recording's header as written.
func (w *Writer) Header() Header { return w.h }

// Size is the number of bytes written so far.
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size
}

// Write appends source's snapshot s. A snapshot whose locks mostly changed
// is written as a keyframe, whatever the count says.
func (w *Writer) Write(source int, s model.Snapshot) error {
	if source < 0 || source >= len(w.h.Sources) {
		return fmt.Errorf("recording: no source %d (the header names %d)", source, len(w.h.Sources))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	st := w.states[source]
	if st == nil {
		st = &writeState{}
		w.states[source] = st
	}
	w.qt.Snapshot(&s)
	kind := byte(kindDelta)
	prev := st.prev
	if prev == nil || st.sinceKey+1 >= w.h.KeyframeEvery {
		kind, prev = kindKeyframe, nil
	}
	locks, err := encodeLocks(s.Locks, st.last, st.prev)
	if err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	body, literals, err := encodeBody(&s, locks, prev)
	if err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	if kind == kindDelta && literals > len(locks)/2 && literals > 8 {
		kind = kindKeyframe
		if body, _, err = encodeBody(&s, locks, nil); err != nil {
			return fmt.Errorf("recording: %w", err)
		}
	}
	p := prefix{kind: kind, source: source, seq: st.seq, taken: s.Taken}
	content := p.append(nil)
	content = w.enc.EncodeAll(body, content)
	rec := frame(content)
	if _, err := w.w.Write(rec); err != nil {
		w.err = fmt.Errorf("recording: %w", err)
		return w.err
	}
	w.size += int64(len(rec))
	st.seq++
	// last's array is reused: a copy per poll was most of what a
	// collector allocated (and so most of its collections). A snapshot
	// stored as the last one was (every lock the same bytes, at rest) is
	// not copied at all: last already holds locks stored as these, and
	// copying 1,000 of them (pointers, so under write barriers) was two
	// fifths of such a write (issue 26).
	// What last keeps by reference (the session, the blockers) is taken
	// from this snapshot even so: last must hold no older rows' arrays
	// than the write before this one's, as a full copy left it, so that a
	// caller that reuses a snapshot's arrays two writes later does not
	// have its new blockers read as the old (strings, being immutable,
	// may stay older).
	if len(s.Locks) != len(st.last) || !slices.Equal(locks, st.prev) {
		st.last = append(st.last[:0], s.Locks...)
	} else {
		for i := range s.Locks {
			l, n := &st.last[i], &s.Locks[i]
			l.Backend, l.BlockedBy, l.BlockedByOwners = n.Backend, n.BlockedBy, n.BlockedByOwners
		}
	}
	st.prev = locks
	if kind == kindKeyframe {
		st.sinceKey = 0
		if w.f != nil {
			if err := w.f.Sync(); err != nil {
				w.err = fmt.Errorf("recording: %w", err)
				return w.err
			}
		}
	} else {
		st.sinceKey++
	}
	return nil
}

// Close syncs and closes the file Create opened. It returns the first write
// error, if any.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.enc.Close()
	err := w.err
	if w.f != nil {
		if e := w.f.Sync(); err == nil && e != nil {
			err = e
		}
		if e := w.f.Close(); err == nil && e != nil {
			err = e
		}
		w.f = nil
	}
	if w.err == nil {
		w.err = errors.New("recording: closed")
	}
	return err
}
