package recording

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/locktop/locktop/model"
)

// A record's body, before compression: the snapshot's own fields but its
// locks and Taken (as JSON, length first), then the locks as operations on
// the source's previous snapshot, their count first:
//
//	opCopy    start, n (uvarints): the previous snapshot's locks start..start+n
//	opLiteral len (uvarint), the stored lock (see stable)
//
// A keyframe has literals only.
const (
	opCopy    = 'c'
	opLiteral = 'l'
)

var errBadLock = errors.New("bad lock")

// state is one source's snapshot as stored: its locks as stored bytes, in
// order, and the rest of the snapshot.
type state struct {
	seq   uint64
	meta  []byte
	locks []string
}

// encodeBody builds the body of next, whose locks are stored as locks, as
// ops on prev (nil: a keyframe), and counts the locks not found in prev.
func encodeBody(next *model.Snapshot, locks, prev []string) (body []byte, literals int, err error) {
	meta, err := json.Marshal(snapMeta(next))
	if err != nil {
		return nil, 0, err
	}
	type op struct {
		copy     bool
		start, n int
		lit      string
	}
	var ops []op
	if prev != nil && len(locks) > 0 && slices.Equal(locks, prev) {
		// At rest nothing moved: one copy of every lock, and no index of
		// prev to build (strings reused from prev compare by pointer).
		ops = []op{{copy: true, n: len(locks)}}
		locks = nil
	}
	var where map[string][]int
	if prev != nil && locks != nil {
		where = make(map[string][]int, len(prev))
		for i, l := range prev {
			where[l] = append(where[l], i)
		}
	}
	for _, l := range locks {
		cands := where[l]
		if len(cands) == 0 {
			ops = append(ops, op{lit: l})
			literals++
			continue
		}
		j := cands[0]
		if last := len(ops) - 1; last >= 0 && ops[last].copy {
			// Extend the run when the lock follows the last one copied.
			want := ops[last].start + ops[last].n
			for _, c := range cands {
				if c == want {
					j = c
					break
				}
			}
			if j == want {
				ops[last].n++
				continue
			}
		}
		ops = append(ops, op{copy: true, start: j, n: 1})
	}
	body = binary.AppendUvarint(nil, uint64(len(meta)))
	body = append(body, meta...)
	body = binary.AppendUvarint(body, uint64(len(ops)))
	for _, o := range ops {
		if o.copy {
			body = append(body, opCopy)
			body = binary.AppendUvarint(body, uint64(o.start))
			body = binary.AppendUvarint(body, uint64(o.n))
			continue
		}
		body = append(body, opLiteral)
		body = binary.AppendUvarint(body, uint64(len(o.lit)))
		body = append(body, o.lit...)
	}
	return body, literals, nil
}

// snapMeta is the snapshot without its locks and Taken, which are stored
// apart; any other field model.Snapshot has is kept.
func snapMeta(s *model.Snapshot) model.Snapshot {
	m := *s
	m.Locks, m.Taken = nil, time.Time{}
	return m
}

// decodeBody applies a body to prev (nil for a keyframe) and returns the
// source's new state.
func decodeBody(body []byte, prev []string) (meta []byte, locks []string, err error) {
	bad := func(what string) error { return fmt.Errorf("damaged body: %s", what) }
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return nil, nil, bad("meta")
	}
	meta, body = body[k:k+int(n)], body[k+int(n):]
	count, k := binary.Uvarint(body)
	if k <= 0 || count > uint64(len(body)) {
		return nil, nil, bad("op count")
	}
	body = body[k:]
	locks = make([]string, 0, count)
	for range count {
		if len(body) == 0 {
			return nil, nil, bad("ops cut short")
		}
		switch body[0] {
		case opCopy:
			start, k1 := binary.Uvarint(body[1:])
			if k1 <= 0 {
				return nil, nil, bad("copy start")
			}
			cnt, k2 := binary.Uvarint(body[1+k1:])
			if k2 <= 0 || start > uint64(len(prev)) || cnt > uint64(len(prev))-start {
				return nil, nil, bad("copy beyond the previous snapshot")
			}
			locks = append(locks, prev[start:start+cnt]...)
			body = body[1+k1+k2:]
		case opLiteral:
			l, k1 := binary.Uvarint(body[1:])
			if k1 <= 0 || l > uint64(len(body)-1-k1) {
				return nil, nil, bad("literal")
			}
			locks = append(locks, string(body[1+k1:1+k1+int(l)]))
			body = body[1+k1+int(l):]
		default:
			return nil, nil, bad("unknown op")
		}
	}
	return meta, locks, nil
}
