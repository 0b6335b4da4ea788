package recording

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// A valid header followed by 4 MB of record markers: every marker is a
// damaged record. Reading it must not cost memory in proportion to the
// damage (32 MB of markers took 686–893 MB; 4 MB read now allocates a few
// KB): consecutive damage of one kind is one Damage, and the index stays
// small.
func TestRepeatedMarkersBoundedMemory(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: time.Unix(0, 0), Interval: time.Second, KeyframeEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := append(buf.Bytes(), bytes.Repeat(marker[:], (4<<20)/len(marker))...)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if len(r.Damage) > 10 {
		t.Errorf("%d Damage entries for one run of damage", len(r.Damage))
	}
	// TotalAlloc counts every allocation made while reading, freed or not.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("reading allocated %d MB, want at most 16", got>>20)
	}
}
