package recording

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// heap is the bytes the heap holds once garbage is collected.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// allocated is what fn allocates, freed or not.
func allocated(fn func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A recording of ~5.5 MB (query texts that do not compress) is read as a
// stream: opening it keeps the index, not the file, and stepping through
// every snapshot keeps about one snapshot, not the frames already seen.
// (It was read whole: the file's size in memory before the first step.)
// Quiet, opening kept 1.0 MB and stepping 1.9 MB; the bounds are
// fractions of the file, so a reader that holds it whole fails. (The file
// was 24 MB: 44 s of CPU under -race, for the same proof.)
func TestOpenKeepsNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.ltr")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, KeyframeEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.NewChaCha8([32]byte{1, 2})
	noise := func(n int) string {
		b := make([]byte, n)
		_, _ = rng.Read(b)
		for i := range b {
			b[i] = '!' + b[i]%90
		}
		return string(b)
	}
	const steps, locks = 60, 100
	for i := range steps {
		s := model.Snapshot{Taken: t0.Add(time.Duration(i) * time.Second)}
		for j := range locks {
			s.Locks = append(s.Locks, model.Lock{Kind: model.KindAdvisory, PID: int32(1000 + j), Database: "app", Granted: true,
				Mode: model.ModeExclusive, Namespace: "AGENT", EntityID: int64(j), Pair: true, Backend: &model.Backend{Query: "SELECT /* " + noise(1000) + " */ " + strconv.Itoa(i)}})
		}
		if err := w.Write(0, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < 5<<20 {
		t.Fatalf("the recording is only %d MB: the test needs a big one", fi.Size()>>20)
	}

	base := heap()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != steps || len(r.Damage) != 0 {
		t.Fatalf("%d steps, damage %v", r.Len(), r.Damage)
	}
	if kept := int64(heap()) - int64(base); kept > fi.Size()/2 {
		t.Errorf("an open recording of %d MB keeps %d MB", fi.Size()>>20, kept>>20)
	}
	var most int64
	for i := range r.Len() {
		snaps, err := r.At(i)
		if err != nil {
			t.Fatal(err)
		}
		if len(snaps[0].Locks) != locks {
			t.Fatalf("step %d: %d locks", i, len(snaps[0].Locks))
		}
		if i%10 == 0 {
			most = max(most, int64(heap())-int64(base))
		}
	}
	// One snapshot decoded is ~100 KB of query text, the encoded record as
	// much again, and the decoder's buffers: well under the file's size.
	if most > fi.Size()*3/4 {
		t.Errorf("stepping through %d MB kept up to %d MB", fi.Size()>>20, most>>20)
	}
	runtime.KeepAlive(r)
}

// The damaged files of issue 20 item 8, as files: a valid header and then
// 12 MB of record markers, or 12 MB of zeros. Indexing them reads them as
// a stream through a 1 MB window: what it allocates (1.0 MB, quiet) does
// not grow with them, and stays under a third of what a whole read takes.
func TestOpenDamagedFileBounded(t *testing.T) {
	var hdr bytes.Buffer
	w, err := NewWriter(&hdr, Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, KeyframeEvery: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for name, tail := range map[string][]byte{
		"markers": bytes.Repeat(marker[:], (12<<20)/len(marker)),
		"zeros":   make([]byte, 12<<20),
	} {
		path := filepath.Join(t.TempDir(), name+".ltr")
		if err := os.WriteFile(path, append(bytes.Clone(hdr.Bytes()), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		var r *Recording
		got := allocated(func() {
			if r, err = Open(path); err != nil {
				t.Fatal(err)
			}
		})
		if r.Len() != 0 || len(r.Damage) == 0 || len(r.Damage) > 10 {
			t.Errorf("%s: %d steps, %d damage entries", name, r.Len(), len(r.Damage))
		}
		r.Close()
		if got > 4<<20 {
			t.Errorf("%s: indexing %d MB of damage allocated %d MB", name, len(tail)>>20, got>>20)
		}
	}
}

// A marker that straddles the end of the reader's window is found: a
// damaged record, then a good one whose marker sits across the window's
// end.
func TestMarkerAcrossWindow(t *testing.T) {
	good := write(t, 1, series(2, 3, 0))
	h, pos, err := decodeHeader(good)
	if err != nil {
		t.Fatal(err)
	}
	_ = h
	first := wholeRecords(good, pos) // the end of the records
	rec := good[pos:first]
	// Header, garbage up to 2 bytes before the window's end, the records.
	data := append(bytes.Clone(good[:pos]), bytes.Repeat([]byte{'x'}, chunk-pos-2)...)
	data = append(data, rec...)
	path := filepath.Join(t.TempDir(), "straddle.ltr")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Len() != 2 || len(r.Damage) != 1 {
		t.Fatalf("%d steps, damage %v: want the 2 records after the garbage", r.Len(), r.Damage)
	}
}

// Segment files read as a stream (OpenFiles) are the recording Concat
// makes of their bytes: the same steps, torn tails cut off, foreign
// segments skipped.
func TestOpenFilesIsConcat(t *testing.T) {
	dir := t.TempDir()
	a, b := write(t, 2, series(5, 4, 0.5)), write(t, 2, series(4, 4, 0.5))
	b = b[:len(b)-3] // torn
	other := func() []byte {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Header{Server: "elsewhere", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, KeyframeEvery: 2})
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		return buf.Bytes()
	}()
	var paths []string
	for i, seg := range [][]byte{a, other, b} {
		p := filepath.Join(dir, strconv.Itoa(i)+".ltr")
		if err := os.WriteFile(p, seg, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	data, torn, skipped, err := Concat([][]byte{a, other, b})
	if err != nil {
		t.Fatal(err)
	}
	want, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	got, gtorn, gskipped, err := OpenFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.Len() != want.Len() || gtorn != torn || gskipped != skipped || torn != 1 || skipped != 1 {
		t.Fatalf("OpenFiles: %d steps, torn %d, skipped %d; Concat: %d, %d, %d", got.Len(), gtorn, gskipped, want.Len(), torn, skipped)
	}
	for i := range want.Len() {
		g, err := got.Merged(i)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := want.Merged(i)
		same(t, "step "+strconv.Itoa(i), g, w)
	}
}
