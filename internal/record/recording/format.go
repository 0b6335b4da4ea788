package recording

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/locktop/locktop/model"
)

// Version is the layout this package writes, and the newest it reads.
const Version = 1

// Magic opens every recording.
const Magic = "LOCKTOPR"

// marker opens every record, so that a reader can find the next record after
// a damaged one.
var marker = [4]byte{0xF0, 'R', 'E', 'C'}

// Record kinds.
const (
	kindKeyframe = 'K' // every lock, in full
	kindDelta    = 'D' // runs copied from the source's previous snapshot, and new locks
)

// Sizes of the framing.
const (
	headerFixed = len(Magic) + 2 + 4 // magic, version, header length
	recordFixed = 4 + 4 + 4          // marker, length, CRC
	// maxRecord bounds a record's length, so that a damaged length field is
	// not believed.
	maxRecord = 256 << 20
	maxHeader = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header describes a recording: what was recorded, where and when.
type Header struct {
	// Server names the watched server as the dashboard's header does:
	// user@host:port/database, never a password.
	Server string `json:"server"`
	// Info is the server's description at the start of the recording.
	Info model.ServerInfo `json:"info"`
	// Sources names the recorded sources; a record's source is an index
	// into it. Source 0 is the PostgreSQL monitor.
	Sources []string `json:"sources"`
	// Start is when the recording began, by the recorder's clock.
	Start time.Time `json:"start"`
	// Interval is the poll interval the recorder asked for.
	Interval time.Duration `json:"interval"`
	// KeyframeEvery is how many records of a source there are from one of
	// its keyframes to the next.
	KeyframeEvery int `json:"keyframe_every"`
	// Locktop is the version of locktop that wrote the file.
	Locktop string `json:"locktop,omitempty"`
	// QueryText is how much of each session's query text the file keeps:
	// "full" (also when empty: files written before the choice existed),
	// "normalized" (literals replaced by $n) or "none". Writer.Write
	// applies it before a snapshot is encoded, so the text never reaches
	// the disk.
	QueryText string `json:"query_text,omitempty"`
}

// Errors of a file that cannot be read as a recording at all. Damage after
// the header is not an error: the damaged records are skipped and listed in
// Recording.Damage.
var (
	// ErrNotRecording: the file does not start with Magic.
	ErrNotRecording = errors.New("not a locktop recording")
	// ErrDamagedHeader: the header is cut short or fails its checksum.
	ErrDamagedHeader = errors.New("the recording's header is damaged")
)

// VersionError is a recording written in a layout newer than this package
// reads.
type VersionError struct {
	Got int // the file's layout
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("recorded by a newer locktop (format version %d; this one reads up to %d): use a newer locktop to read it", e.Got, Version)
}

// encodeHeader is the header as it opens the file.
func encodeHeader(h Header) ([]byte, error) {
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, headerFixed+len(js)+4)
	b = append(b, Magic...)
	b = binary.BigEndian.AppendUint16(b, Version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(js, castagnoli)), nil
}

// decodeHeader reads the header at the start of data and returns it and
// where the records start.
func decodeHeader(data []byte) (Header, int, error) {
	var h Header
	if len(data) < len(Magic) || string(data[:len(Magic)]) != Magic {
		return h, 0, ErrNotRecording
	}
	if len(data) < headerFixed {
		return h, 0, ErrDamagedHeader
	}
	// The version comes before anything whose layout it could change.
	if v := int(binary.BigEndian.Uint16(data[len(Magic):])); v > Version {
		return h, 0, &VersionError{Got: v}
	} else if v == 0 {
		return h, 0, ErrDamagedHeader
	}
	n := int(binary.BigEndian.Uint32(data[len(Magic)+2:]))
	end := headerFixed + n + 4
	if n > maxHeader || len(data) < end {
		return h, 0, ErrDamagedHeader
	}
	js := data[headerFixed : headerFixed+n]
	if crc32.Checksum(js, castagnoli) != binary.BigEndian.Uint32(data[headerFixed+n:]) {
		return h, 0, ErrDamagedHeader
	}
	if err := json.Unmarshal(js, &h); err != nil {
		return h, 0, fmt.Errorf("%w: %v", ErrDamagedHeader, err)
	}
	return h, end, nil
}

// prefix is the part of a record read without decompressing it: enough to
// index the file.
type prefix struct {
	kind   byte
	source int
	seq    uint64 // the source's record number, from 0
	taken  time.Time
}

func (p prefix) append(b []byte) []byte {
	b = append(b, p.kind)
	b = binary.AppendUvarint(b, uint64(p.source))
	b = binary.AppendUvarint(b, p.seq)
	return binary.AppendVarint(b, p.taken.UnixNano())
}

// decodePrefix reads a prefix from the start of b and returns it and its
// length.
func decodePrefix(b []byte) (prefix, int, error) {
	var p prefix
	if len(b) < 1 || (b[0] != kindKeyframe && b[0] != kindDelta) {
		return p, 0, errors.New("unknown record kind")
	}
	p.kind = b[0]
	n := 1
	src, k := binary.Uvarint(b[n:])
	if k <= 0 || src > 1<<16 {
		return p, 0, errors.New("bad source")
	}
	n += k
	seq, k := binary.Uvarint(b[n:])
	if k <= 0 {
		return p, 0, errors.New("bad sequence number")
	}
	n += k
	ns, k := binary.Varint(b[n:])
	if k <= 0 {
		return p, 0, errors.New("bad time")
	}
	n += k
	p.source, p.seq, p.taken = int(src), seq, time.Unix(0, ns)
	return p, n, nil
}

// frame wraps a record's content (prefix and compressed body) in its
// marker, length and checksum.
func frame(content []byte) []byte {
	b := make([]byte, 0, recordFixed+len(content))
	b = append(b, marker[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(content)))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(content, castagnoli))
	return append(b, content...)
}
