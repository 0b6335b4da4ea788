package recording

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
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
	off, end int // the compressed body within data
	prev     int // the entry this delta applies to; -1 for a keyframe
}

// Recording is a recording read into memory and indexed. Its steps are its
// readable records in the order of their Taken; step i is one source's
// snapshot, and At(i) is what every source showed then.
//
// A Recording decodes lazily and caches the last snapshot of each source,
// so that stepping forward decodes one delta; it is not safe for concurrent
// use.
type Recording struct {
	Header Header
	// Damage lists what was skipped: torn, damaged or unreadable records,
	// and the deltas after them up to their source's next keyframe.
	Damage []Damage

	data     []byte
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

// Open reads and indexes the recording at path.
func Open(path string) (*Recording, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Read(data)
}

// Read indexes a recording held in data; it keeps data.
func Read(data []byte) (*Recording, error) {
	h, pos, err := decodeHeader(data)
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		return nil, err
	}
	r := &Recording{Header: h, data: data, dec: dec, cache: map[int]cached{}, bySource: make([][]int, len(h.Sources))}
	last := map[int]int{} // per source, its last readable entry
	for pos < len(data) {
		next, e, why := r.record(pos)
		if why != "" {
			// Look for the next record; none after a bad one means the file
			// ends in it.
			q := bytes.Index(data[pos+1:], marker[:])
			if q < 0 {
				if next > len(data) {
					why = "cut short: a torn last record"
				}
				r.damage(pos, why)
				break
			}
			r.damage(pos, why)
			pos += 1 + q
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

// record reads the record at pos: where the next one starts, and the
// entry, or why it cannot be read.
func (r *Recording) record(pos int) (int, entry, string) {
	d := r.data
	if len(d)-pos < recordFixed {
		return pos + recordFixed, entry{}, "cut short: a torn last record"
	}
	if !bytes.Equal(d[pos:pos+4], marker[:]) {
		return pos, entry{}, "unreadable bytes"
	}
	n := int(binary.BigEndian.Uint32(d[pos+4:]))
	if n > maxRecord {
		return pos, entry{}, "a damaged record (its length is impossible)"
	}
	end := pos + recordFixed + n
	if end > len(d) {
		return end, entry{}, "a damaged record (it runs past the end of the file)"
	}
	content := d[pos+recordFixed : end]
	if crc32.Checksum(content, castagnoli) != binary.BigEndian.Uint32(d[pos+8:]) {
		return end, entry{}, "a damaged record (its checksum does not match)"
	}
	p, k, err := decodePrefix(content)
	if err != nil {
		return end, entry{}, "a damaged record (" + err.Error() + ")"
	}
	return end, entry{prefix: p, off: pos + recordFixed + k, end: end}, ""
}

// damage records what was skipped at pos. A run of damage of one kind with
// no readable record in between is one Damage, at its start: a file of
// repeated markers must not cost memory per marker.
func (r *Recording) damage(pos int, why string) {
	if n := len(r.Damage); n > 0 && r.Damage[n-1].Reason == why && r.damagedAt == len(r.entries) {
		return
	}
	r.Damage = append(r.Damage, Damage{Offset: int64(pos), Reason: why})
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
		body, err := r.dec.DecodeAll(r.data[en.off:en.end], nil)
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
