package recording

import (
	"encoding/binary"
	"errors"
	"slices"
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
