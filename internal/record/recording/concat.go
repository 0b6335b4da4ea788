package recording

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
	"sort"
)

// ErrNoSegment: Concat was given no segment it could read.
var ErrNoSegment = errors.New("no readable segment")

// Concat joins the segments of one recorder's history (each a recording of
// its own, in time order) into one recording: the first readable
// segment's header, then the records of every segment whose header names
// the same server and sources. Each segment's writer starts every source
// with a keyframe, so no delta reaches across a seam.
//
// A segment whose writer was killed mid-record ends in a torn record; it
// is cut off here, so that the seam after it reads clean, and counted in
// torn. A segment whose header is unreadable, or names other sources (a
// history directory shared by two configurations), is skipped and counted
// in skipped.
func Concat(segments [][]byte) (data []byte, torn, skipped int, err error) {
	var first *Header
	for _, seg := range segments {
		h, pos, err := decodeHeader(seg)
		if err != nil {
			skipped++
			continue
		}
		if first == nil {
			first = &h
			data = append(data, seg[:pos]...)
		} else if h.Server != first.Server || !slices.Equal(h.Sources, first.Sources) {
			skipped++
			continue
		}
		end := wholeRecords(seg, pos)
		if end < len(seg) {
			torn++
		}
		data = append(data, seg[pos:end]...)
	}
	if first == nil {
		return nil, 0, skipped, ErrNoSegment
	}
	return data, torn, skipped, nil
}

// wholeRecords is where the last record of seg (from pos on) that is
// whole by its length ends. Damage inside a record is the reader's to
// skip; only a tail cut short is dropped.
func wholeRecords(seg []byte, pos int) int {
	for len(seg)-pos >= recordFixed {
		n := int(binary.BigEndian.Uint32(seg[pos+4:]))
		if n > maxRecord || len(seg)-pos-recordFixed < n {
			break
		}
		pos += recordFixed + n
	}
	return pos
}

// OpenFiles is Concat for segment files: it indexes them as one recording
// read as a stream, as Open does, without reading them into memory. The
// files stay open until the Recording's Close.
func OpenFiles(paths []string) (r *Recording, torn, skipped int, err error) {
	var (
		first *Header
		parts multiAt
		files []*os.File
	)
	defer func() {
		if err != nil {
			for _, f := range files {
				f.Close()
			}
		}
	}()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			skipped++
			continue
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			skipped++
			continue
		}
		fa := &fileAt{r: f, size: fi.Size()}
		h, pos, err := readHeader(fa, fi.Size())
		if err != nil || first != nil && (h.Server != first.Server || !slices.Equal(h.Sources, first.Sources)) {
			f.Close()
			skipped++
			continue
		}
		files = append(files, f)
		if first == nil {
			first = &h
			parts.add(f, 0, pos)
		}
		end, err := wholeRecordsAt(fa, pos)
		if err != nil {
			return nil, torn, skipped, err
		}
		if end < fi.Size() {
			torn++
		}
		parts.add(f, pos, end-pos)
	}
	if first == nil {
		return nil, 0, skipped, ErrNoSegment
	}
	r, err = index(&fileAt{r: &parts, size: parts.size}, parts.size)
	if err != nil {
		return nil, torn, skipped, err
	}
	r.closer = closeAll(files)
	return r, torn, skipped, nil
}

// wholeRecordsAt is wholeRecords on a file.
func wholeRecordsAt(src bytesAt, pos int64) (int64, error) {
	size := src.(*fileAt).size
	for size-pos >= recordFixed {
		b, err := src.bytesAt(pos, recordFixed, nil)
		if err != nil {
			return pos, err
		}
		n := int64(binary.BigEndian.Uint32(b[4:]))
		if n > maxRecord || size-pos-recordFixed < n {
			break
		}
		pos += recordFixed + n
	}
	return pos, nil
}

// multiAt is sections of files read as one: io.ReaderAt.
type multiAt struct {
	parts []section
	size  int64
}

type section struct {
	r        io.ReaderAt
	off, len int64 // within r
	at       int64 // within the whole
}

func (m *multiAt) add(r io.ReaderAt, off, n int64) {
	if n > 0 {
		m.parts = append(m.parts, section{r: r, off: off, len: n, at: m.size})
		m.size += n
	}
}

func (m *multiAt) ReadAt(p []byte, off int64) (int, error) {
	done := 0
	i := sort.Search(len(m.parts), func(i int) bool { return m.parts[i].at+m.parts[i].len > off })
	for ; i < len(m.parts) && done < len(p); i++ {
		s := m.parts[i]
		from := off + int64(done) - s.at
		k := int(min(int64(len(p)-done), s.len-from))
		n, err := s.r.ReadAt(p[done:done+k], s.off+from)
		done += n
		if n < k {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

type closeAll []*os.File

func (c closeAll) Close() error {
	var errs []error
	for _, f := range c {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
