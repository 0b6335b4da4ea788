package history

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/model"
)

var t0 = time.Date(2026, 1, 15, 3, 0, 0, 0, time.UTC)

func header() recording.Header {
	return recording.Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Interval: time.Second}
}

// snap is the server at step i: n advisory locks, every one taken anew
// (a new pid) each step, so that every record costs bytes.
func snap(i, n int) model.Snapshot {
	at := t0.Add(time.Duration(i) * time.Second)
	s := model.Snapshot{Taken: at, Connections: n}
	for k := range n {
		s.Locks = append(s.Locks, model.Lock{
			Kind: model.KindAdvisory, PID: int32(1000 + i*n + k), Database: "app", Mode: model.ModeExclusive,
			Granted: true, Namespace: "AGENT", EntityID: int64(k), Pair: true, HeldSince: at.Add(-time.Duration(k) * time.Millisecond),
			Backend: &model.Backend{Query: fmt.Sprintf("SELECT pg_advisory_lock(1, %d) /* step %d */", k, i)},
		})
	}
	return s
}

// clock is a wall clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestMemoryKeepsTheLastKeep(t *testing.T) {
	c := &clock{t0}
	h, err := New(Options{Keep: 80 * time.Second, Header: header(), Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for i := range 300 {
		c.t = t0.Add(time.Duration(i) * time.Second)
		if err := h.Write(0, snap(i, 5)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := h.Recording()
	if err != nil {
		t.Fatal(err)
	}
	first, last := r.Span()
	if !last.Equal(t0.Add(299 * time.Second)) {
		t.Fatalf("the history ends at %v, want the last write %v", last, t0.Add(299*time.Second))
	}
	// At least Keep, at most Keep and one segment (Keep/8) more.
	if kept := last.Sub(first); kept < 80*time.Second || kept > 90*time.Second+time.Second {
		t.Fatalf("the history spans %v, want 80s to 91s", kept)
	}
	if len(r.Damage) != 0 {
		t.Fatalf("damage at the seams: %v", r.Damage)
	}
	// Every step reads back as written, across the seams.
	for i := range r.Len() {
		s, err := r.Merged(i)
		if err != nil {
			t.Fatal(err)
		}
		want := int(r.Time(i).Sub(t0) / time.Second)
		if got := s.Locks[0].PID; got != int32(1000+want*5) {
			t.Fatalf("step %d (%v): pid %d, want %d", i, r.Time(i), got, 1000+want*5)
		}
	}
}

func TestMemoryKeepsWithinMaxBytes(t *testing.T) {
	c := &clock{t0}
	const max = 32 << 10
	h, err := New(Options{MaxBytes: max, Header: header(), Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	peak := int64(0)
	for i := range 300 {
		c.t = t0.Add(time.Duration(i) * time.Second)
		if err := h.Write(0, snap(i, 20)); err != nil {
			t.Fatal(err)
		}
		peak = max64(peak, h.Size())
	}
	if peak > max+max/segmentsPerBound {
		t.Fatalf("the history grew to %d bytes, over its bound %d and one segment", peak, max)
	}
	r, err := h.Recording()
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := r.Span(); first.Before(t0.Add(150 * time.Second)) {
		t.Fatalf("the history still holds %v: the size bound dropped nothing", first)
	}
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// dirSize is the bytes of dir's segment files.
func dirSize(t *testing.T, dir string) (int64, int) {
	t.Helper()
	names, err := files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range names {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n, len(names)
}

func TestDirRemovesBySize(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	const max = 32 << 10
	h, err := New(Options{Dir: dir, MaxBytes: max, Header: header(), Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		c.t = t0.Add(time.Duration(i) * time.Second)
		if err := h.Write(0, snap(i, 20)); err != nil {
			t.Fatal(err)
		}
		if n, _ := dirSize(t, dir); n > max+max/segmentsPerBound {
			t.Fatalf("step %d: the directory holds %d bytes, over its bound %d and one segment", i, n, max)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, files := dirSize(t, dir); files < 2 {
		t.Fatalf("%d files: the history did not rotate", files)
	}
	r, st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, last := r.Span(); !last.Equal(t0.Add(299*time.Second)) || st.Torn != 0 || st.Skipped != 0 {
		t.Fatalf("read back: last %v, %+v", last, st)
	}
}

func TestDirRemovesByAge(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t0}
	h, err := New(Options{Dir: dir, Keep: 80 * time.Second, Header: header(), Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		c.t = t0.Add(time.Duration(i) * time.Second)
		if err := h.Write(0, snap(i, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	_, before := dirSize(t, dir)
	// A process started later on the same directory keeps the files of
	// the last 80 s (by their time of last write) and removes the rest.
	names, _ := files(dir)
	for i, f := range names {
		at := time.Now().Add(-time.Duration(len(names)-i) * 30 * time.Second)
		if err := os.Chtimes(f, at, at); err != nil {
			t.Fatal(err)
		}
	}
	h2, err := New(Options{Dir: dir, Keep: 80 * time.Second, Header: header()})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if _, after := dirSize(t, dir); after != 2 {
		t.Fatalf("%d files of %d left, want the 2 written within 80s", after, before)
	}
}

// TestKillNine kills a writing process with SIGKILL and reads its
// directory back: everything up to the last whole record reads, and a
// record cut in half is skipped.
func TestKillNine(t *testing.T) {
	if dir := os.Getenv("HISTORY_CHILD_DIR"); dir != "" {
		child(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillNine$")
	cmd.Env = append(os.Environ(), "HISTORY_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child says when it has written 50 snapshots, and goes on.
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready" {
		t.Fatalf("the child: %q, %v", buf, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	r, st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() < 50 || st.Skipped != 0 {
		t.Fatalf("after kill -9: %d snapshots, %+v; want at least 50", r.Len(), st)
	}
	// Tear the last record as a kill in the middle of a write does.
	names, _ := files(dir)
	lastFile := names[len(names)-1]
	b, err := os.ReadFile(lastFile)
	if err != nil {
		t.Fatal(err)
	}
	whole, _, _, err := recording.Concat([][]byte{b}) // the kill may have torn one already
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(lastFile, int64(len(whole)-7)); err != nil {
		t.Fatal(err)
	}
	r2, st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Torn != 1 || r2.Len() != r.Len()-1 || len(r2.Damage) != 0 {
		t.Fatalf("torn: %d snapshots of %d, %+v, damage %v; want the last one skipped", r2.Len(), r.Len(), st, r2.Damage)
	}
	// A process started again on the directory goes on where it was.
	h, err := New(Options{Dir: dir, Header: header()})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Write(0, snap(100000, 2)); err != nil {
		t.Fatal(err)
	}
	h.Close()
	r3, st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Len() != r2.Len()+1 || len(r3.Damage) != 0 {
		t.Fatalf("after a restart: %d snapshots, want %d; %+v %v", r3.Len(), r2.Len()+1, st, r3.Damage)
	}
}

// child writes snapshots to dir until it is killed, in one segment.
func child(dir string) {
	h, err := New(Options{Dir: dir, Header: header()})
	if err != nil {
		panic(err)
	}
	for i := 0; ; i++ {
		if err := h.Write(0, snap(i, 10)); err != nil {
			panic(err)
		}
		if i == 50 {
			os.Stdout.WriteString("ready")
		}
	}
}

func TestOpenEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := Open(dir); err == nil {
		t.Fatal("an empty directory opened as a history")
	}
	if err := os.WriteFile(filepath.Join(dir, prefix+"x"+suffix), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, st, err := Open(dir); err == nil || st.Skipped != 1 {
		t.Fatalf("a directory of junk: %v, %+v", err, st)
	}
}

// A reader of the history never holds up Write, which the poll loop calls
// after every poll: while Bytes reads the segments, a Write returns.
func TestWriteDoesNotWaitForReaders(t *testing.T) {
	h, err := New(Options{Header: header()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Write(0, snap(0, 3)); err != nil {
		t.Fatal(err)
	}
	reading, hold := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	testHookRead = func() { close(reading); <-hold }
	defer func() { testHookRead = nil }()
	defer release() // before Close, which a held reader would block
	read := make(chan error, 1)
	go func() { _, err := h.Bytes(); read <- err }()
	<-reading
	wrote := make(chan error, 1)
	go func() { wrote <- h.Write(0, snap(1, 3)) }()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Write waited for a reader of the history")
	}
	release()
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}
