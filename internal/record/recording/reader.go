package recording

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/locktop/locktop/model"
)

// Damage is a part of a recording that could not be read and was skipped.
type Damage struct {
	Offset int64  // where it starts in the file
	Reason string // what was wrong, for people
}

// entry is one readable record.
type entry struct {
	prefix
	off, end int64 // the compressed body within the file
	prev     int   // the entry this delta applies to; -1 for a keyframe
}

// Recording is a recording indexed: where each readable record is, and
// its source, sequence and time. Its steps are its readable records in the
// order of their Taken; step i is one source's snapshot, and At(i) is what
// every source showed then.
//
// A Recording read from a file (Open, OpenFiles) keeps the file open and
// reads a record when a step needs it: it holds the index (a few dozen
// bytes a record) and the last snapshot of each source, never the file,
// and indexing it reads the file as a stream in bounded pieces, so that
// neither the file's size nor its damage decides the memory it takes.
// It decodes lazily and caches the last snapshot of each source, so that
// stepping forward decodes one delta; it is not safe for concurrent use.
type Recording struct {
	Header Header
	// Damage lists what was skipped: torn, damaged or unreadable records,
	// and the deltas after them up to their source's next keyframe.
	Damage []Damage

	src      bytesAt
	size     int64
	closer   io.Closer
	buf      []byte  // reused for reading big records from a file
	entries  []entry // file order
	steps    []int   // entries by Taken
	bySource [][]int // per source, its steps in order
	dec      *zstd.Decoder
	cache    map[int]cached // per source
	// damagedAt is len(entries) when the last Damage was added.
	damagedAt int
}

type cached struct {
	entry int
	st    state
	snap  model.Snapshot
	ok    bool // snap decoded
}

// Open indexes the recording at path, reading it as a stream; the file
// stays open until Close.
func Open(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := index(&fileAt{r: f, size: fi.Size()}, fi.Size())
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}

// Close closes the file a Recording reads from; a Recording read from
// memory has none.
func (r *Recording) Close() error {
	if r.closer == nil {
		return nil
	}
	return r.closer.Close()
}

// Read indexes a recording held in data; it keeps data.
func Read(data []byte) (*Recording, error) { return index(memAt(data), int64(len(data))) }

// bytesAt reads n bytes at off: a slice of memory as it is, or a file's
// bytes read into buf (grown as needed).
type bytesAt interface {
	bytesAt(off int64, n int, buf []byte) ([]byte, error)
	// upTo returns the bytes from off on that are at hand, at least one
	// and at most n (off before the end): the rest of the window.
	upTo(off int64, n int64) ([]byte, error)
}

type memAt []byte

func (m memAt) bytesAt(off int64, n int, _ []byte) ([]byte, error) {
	if off < 0 || off+int64(n) > int64(len(m)) {
		return nil, io.ErrUnexpectedEOF
	}
	return m[off : off+int64(n)], nil
}

// fileAt reads a file through a window of up to chunk bytes, so that
// indexing, which reads a record's 12 bytes of framing, its checksum and the
// next marker, costs a read of the file per chunk, not per record. The
// bytes it returns are the window's: good until the next call.
func (m memAt) upTo(off int64, n int64) ([]byte, error) {
	if off < 0 || off >= int64(len(m)) {
		return nil, io.ErrUnexpectedEOF
	}
	return m[off:min(off+n, int64(len(m)))], nil
}

type fileAt struct {
	r      io.ReaderAt
	size   int64
	win    []byte
	winOff int64
}

func (f *fileAt) bytesAt(off int64, n int, buf []byte) ([]byte, error) {
	if off < 0 || off+int64(n) > f.size {
		return nil, io.ErrUnexpectedEOF
	}
	if off >= f.winOff && off+int64(n) <= f.winOff+int64(len(f.win)) {
		return f.win[off-f.winOff : off-f.winOff+int64(n)], nil
	}
	if n > chunk {
		// A big record: read as it is, into buf.
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := f.r.ReadAt(buf, off); err != nil && !(err == io.EOF && off+int64(n) == f.size) {
			return nil, err
		}
		return buf, nil
	}
	if f.win == nil {
		f.win = make([]byte, chunk)
	}
	w := int(min(int64(chunk), f.size-off))
	f.win, f.winOff = f.win[:w], off
	if k, err := f.r.ReadAt(f.win, off); k < w {
		f.win = f.win[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return f.win[:n], nil
}

func (f *fileAt) upTo(off int64, n int64) ([]byte, error) {
	if off < f.winOff || off >= f.winOff+int64(len(f.win)) {
		if _, err := f.bytesAt(off, 1, nil); err != nil { // refills the window at off
			return nil, err
		}
	}
	return f.win[off-f.winOff : min(off+n, f.winOff+int64(len(f.win)))-f.winOff], nil
}

// chunk is how much of a file indexing reads at once: a record's checksum
// is computed, and the next marker looked for, piece by piece.
const chunk = 1 << 20

func index(src bytesAt, size int64) (*Recording, error) {
	h, pos, err := readHeader(src, size)
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		return nil, err
	}
	r := &Recording{Header: h, src: src, size: size, dec: dec, cache: map[int]cached{}, bySource: make([][]int, len(h.Sources))}
	last := map[int]int{} // per source, its last readable entry
	for pos < size {
		next, e, why := r.record(pos)
		if why != "" {
			// Look for the next record; none after a bad one means the file
			// ends in it.
			q, err := r.nextMarker(pos + 1)
			if err != nil {
				return nil, err
			}
			if q < 0 {
				if next > size {
					why = "cut short: a torn last record"
				}
				r.damage(pos, why)
				break
			}
			r.damage(pos, why)
			pos = q
			continue
		}
		pos = next
		if e.source >= len(h.Sources) {
			r.damage(e.off, fmt.Sprintf("a record of source %d, which the header does not name", e.source))
			continue
		}
		e.prev = -1
		if e.kind == kindDelta {
			j, ok := last[e.source]
			if !ok || r.entries[j].seq+1 != e.seq {
				r.damage(e.off, fmt.Sprintf("a change of source %q after a damaged record: skipped up to its next full record", h.Sources[e.source]))
				delete(last, e.source)
				continue
			}
			e.prev = j
		}
		last[e.source] = len(r.entries)
		r.entries = append(r.entries, e)
	}
	r.entries = slices.Clip(r.entries)
	r.steps = make([]int, len(r.entries))
	for i := range r.steps {
		r.steps[i] = i
	}
	sort.SliceStable(r.steps, func(a, b int) bool { return r.entries[r.steps[a]].taken.Before(r.entries[r.steps[b]].taken) })
	for i, e := range r.steps {
		s := r.entries[e].source
		r.bySource[s] = append(r.bySource[s], i)
	}
	return r, nil
}

// readHeader reads and checks the header, and says where the records begin.
func readHeader(src bytesAt, size int64) (Header, int64, error) {
	if size < int64(headerFixed) {
		b, err := src.bytesAt(0, int(size), nil)
		if err != nil {
			return Header{}, 0, err
		}
		_, _, err = decodeHeader(b)
		return Header{}, 0, err
	}
	fixed, err := src.bytesAt(0, headerFixed, nil)
	if err != nil {
		return Header{}, 0, err
	}
	if h, _, err := decodeHeader(fixed); err != ErrDamagedHeader {
		return h, 0, err // not a recording, or a version too new
	}
	n := int64(binary.BigEndian.Uint32(fixed[len(Magic)+2:]))
	end := int64(headerFixed) + n + 4
	if n > maxHeader || end > size {
		return Header{}, 0, ErrDamagedHeader
	}
	b, err := src.bytesAt(0, int(end), nil)
	if err != nil {
		return Header{}, 0, err
	}
	h, k, err := decodeHeader(b)
	return h, int64(k), err
}

// record reads the record at pos: where the next one starts, and the
// entry, or why it cannot be read. Its checksum is computed piece by
// piece, so a damaged length costs no more memory than a chunk.
func (r *Recording) record(pos int64) (int64, entry, string) {
	if r.size-pos < recordFixed {
		return pos + recordFixed, entry{}, "cut short: a torn last record"
	}
	hdr, err := r.src.bytesAt(pos, recordFixed, nil)
	if err != nil {
		return pos, entry{}, "unreadable bytes (" + err.Error() + ")"
	}
	if !bytes.Equal(hdr[:4], marker[:]) {
		return pos, entry{}, "unreadable bytes"
	}
	n := int64(binary.BigEndian.Uint32(hdr[4:]))
	sum := binary.BigEndian.Uint32(hdr[8:])
	if n > maxRecord {
		return pos, entry{}, "a damaged record (its length is impossible)"
	}
	end := pos + recordFixed + n
	if end > r.size {
		return end, entry{}, "a damaged record (it runs past the end of the file)"
	}
	var crc uint32
	var head []byte // the content's first bytes, for its prefix
	for off := pos + recordFixed; off < end; {
		b, err := r.src.upTo(off, end-off)
		if err != nil {
			return end, entry{}, "unreadable bytes (" + err.Error() + ")"
		}
		if head == nil {
			head = append([]byte(nil), b[:min(len(b), maxPrefix)]...)
			if len(head) < maxPrefix && off+int64(len(b)) < end {
				// The window ends within the prefix: read it whole.
				p, err := r.src.bytesAt(off, int(min(int64(maxPrefix), end-off)), nil)
				if err != nil {
					return end, entry{}, "unreadable bytes (" + err.Error() + ")"
				}
				head = append(head[:0], p...)
				b, _ = r.src.upTo(off, end-off)
			}
		}
		crc = crc32.Update(crc, castagnoli, b)
		off += int64(len(b))
	}
	if crc != sum {
		return end, entry{}, "a damaged record (its checksum does not match)"
	}
	p, k, err := decodePrefix(head)
	if err != nil {
		return end, entry{}, "a damaged record (" + err.Error() + ")"
	}
	return end, entry{prefix: p, off: pos + recordFixed + int64(k), end: end}, ""
}

// maxPrefix is the longest a record's prefix can be: its kind and three
// varints.
const maxPrefix = 1 + 3*binary.MaxVarintLen64

// nextMarker is where the next record marker at or after from begins, or
// -1 when there is none; it reads the file a chunk at a time.
func (r *Recording) nextMarker(from int64) (int64, error) {
	for from < r.size {
		b, err := r.src.upTo(from, chunk)
		if err == nil && len(b) < len(marker) && from+int64(len(b)) < r.size {
			// Too little at hand to hold a marker: read on from here.
			if _, err = r.src.bytesAt(from, int(min(chunk, r.size-from)), nil); err == nil {
				b, err = r.src.upTo(from, chunk)
			}
		}
		if err != nil {
			return -1, err
		}
		if q := bytes.Index(b, marker[:]); q >= 0 {
			return from + int64(q), nil
		}
		if from+int64(len(b)) >= r.size {
			break
		}
		// A marker may straddle the end of what is at hand.
		from += int64(max(len(b)-(len(marker)-1), 1))
	}
	return -1, nil
}

// damage records what was skipped at pos. A run of damage of one kind with
// no readable record in between is one Damage, at its start: a file of
// repeated markers must not cost memory per marker.
func (r *Recording) damage(pos int64, why string) {
	if n := len(r.Damage); n > 0 && r.Damage[n-1].Reason == why && r.damagedAt == len(r.entries) {
		return
	}
	r.Damage = append(r.Damage, Damage{Offset: pos, Reason: why})
	r.damagedAt = len(r.entries)
}

// Len is the number of steps.
func (r *Recording) Len() int { return len(r.steps) }

// Time is step i's Taken.
func (r *Recording) Time(i int) time.Time { return r.entries[r.steps[i]].taken }

// Source is the source step i is a snapshot of.
func (r *Recording) Source(i int) int { return r.entries[r.steps[i]].source }

// Sources names the recorded sources.
func (r *Recording) Sources() []string { return r.Header.Sources }

// Info is the server's description from the header.
func (r *Recording) Info() model.ServerInfo { return r.Header.Info }

// Index is the last step at or before t, or -1 when t is before the first.
func (r *Recording) Index(t time.Time) int {
	return sort.Search(len(r.steps), func(i int) bool { return r.Time(i).After(t) }) - 1
}

// At returns every source's snapshot as of step i: the source's latest at
// or before it, or a zero Snapshot (Taken zero) for a source not seen yet.
func (r *Recording) At(i int) ([]model.Snapshot, error) {
	if i < 0 || i >= len(r.steps) {
		return nil, fmt.Errorf("recording: no step %d (%d steps)", i, len(r.steps))
	}
	out := make([]model.Snapshot, len(r.Header.Sources))
	for s, steps := range r.bySource {
		j, _ := slices.BinarySearch(steps, i+1)
		if j == 0 {
			continue
		}
		snap, err := r.snapshot(r.steps[steps[j-1]])
		if err != nil {
			return nil, err
		}
		out[s] = snap
	}
	return out, nil
}

// Merged is step i as one snapshot: source 0's (the PostgreSQL monitor's),
// with every other source's locks after its own, as the dashboard merges
// them. Its Taken is the newest of theirs.
func (r *Recording) Merged(i int) (model.Snapshot, error) {
	snaps, err := r.At(i)
	if err != nil {
		return model.Snapshot{}, err
	}
	m := snaps[0]
	m.Locks = slices.Clone(m.Locks)
	for _, s := range snaps[1:] {
		m.Locks = append(m.Locks, s.Locks...)
		if s.Taken.After(m.Taken) {
			m.Taken = s.Taken
		}
	}
	return m, nil
}

// snapshot decodes entry e.
func (r *Recording) snapshot(e int) (model.Snapshot, error) {
	src := r.entries[e].source
	if c, ok := r.cache[src]; ok && c.entry == e && c.ok {
		return c.snap, nil
	}
	st, err := r.state(e)
	if err != nil {
		return model.Snapshot{}, err
	}
	var s model.Snapshot
	if err := json.Unmarshal(st.meta, &s); err != nil {
		return s, fmt.Errorf("recording: snapshot at %d: %w", r.entries[e].off, err)
	}
	s.Taken = r.entries[e].taken
	s.Locks = make([]model.Lock, len(st.locks))
	for i, b := range st.locks {
		if s.Locks[i], err = unstable([]byte(b)); err != nil {
			return s, fmt.Errorf("recording: lock at %d: %w", r.entries[e].off, err)
		}
	}
	r.cache[src] = cached{entry: e, st: st, snap: s, ok: true}
	return s, nil
}

// state is entry e's stored state: from the cache, from the cached state
// before it, or from its keyframe on.
func (r *Recording) state(e int) (state, error) {
	src := r.entries[e].source
	c, hit := r.cache[src]
	if hit && c.entry == e {
		return c.st, nil
	}
	// The chain back to a keyframe or to the cached entry.
	chain := []int{e}
	for j := r.entries[e].prev; j >= 0; j = r.entries[j].prev {
		if hit && j == c.entry {
			break
		}
		chain = append(chain, j)
	}
	var prev []string
	if last := chain[len(chain)-1]; r.entries[last].prev >= 0 {
		prev = c.st.locks // the chain stopped at the cached entry
	}
	var st state
	for k := len(chain) - 1; k >= 0; k-- {
		en := r.entries[chain[k]]
		raw, err := r.src.bytesAt(en.off, int(en.end-en.off), r.buf)
		if err != nil {
			return st, fmt.Errorf("recording: record at %d: %w", en.off, err)
		}
		if len(raw) > chunk {
			r.buf = raw[:0] // a big record's buffer, kept for the next
		}
		body, err := r.dec.DecodeAll(raw, nil)
		if err != nil {
			return st, fmt.Errorf("recording: record at %d: %w", en.off, err)
		}
		if en.kind == kindKeyframe {
			prev = nil
		}
		meta, locks, err := decodeBody(body, prev)
		if err != nil {
			return st, fmt.Errorf("recording: record at %d: %w", en.off, err)
		}
		st = state{seq: en.seq, meta: meta, locks: locks}
		prev = locks
	}
	r.cache[src] = cached{entry: e, st: st}
	return st, nil
}

// Span is the time of the first step and of the last; zero for an empty
// recording.
func (r *Recording) Span() (first, last time.Time) {
	if len(r.steps) == 0 {
		return
	}
	return r.Time(0), r.Time(len(r.steps) - 1)
}

// Keyframes counts the readable keyframes, per kind of record: for tests
// and the size benchmark.
func (r *Recording) Keyframes() (keyframes, deltas int) {
	for _, e := range r.entries {
		if e.kind == kindKeyframe {
			keyframes++
		} else {
			deltas++
		}
	}
	return
}

// Seek is the step a time typed by people names (see ParseAt), from step
// cur: the last step at or before it, or the first step for a time before
// the recording.
func (r *Recording) Seek(text string, cur int) (int, error) {
	if len(r.steps) == 0 {
		return 0, fmt.Errorf("the recording holds no snapshot")
	}
	first, last := r.Span()
	t, err := ParseAt(text, first, last, r.Time(min(max(cur, 0), len(r.steps)-1)))
	if err != nil {
		return 0, err
	}
	return max(r.Index(t), 0), nil
}
