package recording

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/locktop/locktop/model"
)

// The zstd encoder and decoder run with a concurrency of one: nothing of
// theirs may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// write records snaps of source 0 into a file of its own and returns its
// bytes.
func write(t *testing.T, keyEvery int, snaps []model.Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Server: "mon@db:5432/app", Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, KeyframeEvery: keyEvery})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if err := w.Write(0, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func series(n, locks int, changing float64) []model.Snapshot {
	s := newSynth(locks)
	out := make([]model.Snapshot, n)
	for i := range out {
		out[i] = s.step(time.Second, changing)
	}
	return out
}

// same fails unless got is want, compared as JSON (times compare by
// instant, not by location).
func same(t *testing.T, what string, got, want model.Snapshot) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	gt, wt := got.Taken, want.Taken
	got.Taken, want.Taken = time.Time{}, time.Time{}
	if !gt.Equal(wt) {
		t.Fatalf("%s: Taken %v, want %v", what, gt, wt)
	}
	var a, b any
	json.Unmarshal(g, &a)
	json.Unmarshal(w, &b)
	ga, _ := json.Marshal(normTimes(a))
	wb, _ := json.Marshal(normTimes(b))
	if !bytes.Equal(ga, wb) {
		t.Fatalf("%s: differs\n got %s\nwant %s", what, ga, wb)
	}
}

// normTimes rewrites RFC 3339 strings as UTC, so that a location does not
// count as a difference.
func normTimes(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normTimes(x)
		}
		delete(v, "Taken")
	case []any:
		for i, x := range v {
			v[i] = normTimes(x)
		}
	case string:
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
	}
	return v
}

func TestRoundTrip(t *testing.T) {
	snaps := series(50, 200, 0.1)
	r, err := Read(write(t, 7, snaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Damage) != 0 {
		t.Fatalf("damage in a sound file: %v", r.Damage)
	}
	if r.Len() != len(snaps) {
		t.Fatalf("%d steps, want %d", r.Len(), len(snaps))
	}
	if k, d := r.Keyframes(); k != 8 || d != 42 {
		t.Fatalf("%d keyframes and %d deltas, want 8 and 42 (one in 7)", k, d)
	}
	// Forward, backward and at random: every path through the cache.
	for _, i := range []int{0, 1, 2, 3, 20, 19, 49, 6, 7, 8, 0, 48} {
		got, err := r.At(i)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "step "+string(rune('0'+i%10)), got[0], snaps[i])
	}
}

func TestUnchangedLocksCostNothing(t *testing.T) {
	// 1,000 locks that do not change (their held and waited times grow):
	// each delta is one copy run.
	snaps := series(30, 1000, 0)
	data := write(t, 1000, snaps)
	r, err := Read(data)
	if err != nil {
		t.Fatal(err)
	}
	_, first := r.entries[0], r.entries[1]
	if n := first.end - first.off; n > 200 {
		t.Fatalf("a delta of 1,000 unchanged locks takes %d bytes", n)
	}
	got, _ := r.At(29)
	same(t, "last", got[0], snaps[29])
}

func TestTruncatedFile(t *testing.T) {
	snaps := series(20, 50, 0.2)
	data := write(t, 5, snaps)
	for _, cut := range []int{1, 7, 13, 100} {
		r, err := Read(data[:len(data)-cut])
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if r.Len() != 19 {
			t.Fatalf("cut %d: %d steps, want 19 (the torn last skipped)", cut, r.Len())
		}
		if len(r.Damage) != 1 || !strings.Contains(r.Damage[0].Reason, "torn") {
			t.Fatalf("cut %d: damage %v, want one torn record", cut, r.Damage)
		}
		got, err := r.At(18)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "last whole", got[0], snaps[18])
	}
}

func TestCorruptRecord(t *testing.T) {
	snaps := series(20, 50, 0.2)
	data := write(t, 5, snaps)
	r, _ := Read(data)
	// Damage one byte in the middle of record 7 (a delta: keyframes are
	// 0, 5, 10, 15).
	e := r.entries[7]
	bad := bytes.Clone(data)
	bad[(e.off+e.end)/2] ^= 0x55
	r, err := Read(bad)
	if err != nil {
		t.Fatal(err)
	}
	// 7 is damaged; 8 and 9 are deltas on it; 10 is a keyframe again.
	if r.Len() != 17 {
		t.Fatalf("%d steps, want 17", r.Len())
	}
	// One Damage for 7, one for the run of deltas skipped after it.
	if len(r.Damage) != 2 || !strings.Contains(r.Damage[0].Reason, "checksum") {
		t.Fatalf("damage %v", r.Damage)
	}
	for i, want := range map[int]int{6: 6, 7: 10, 16: 19} {
		got, err := r.At(i)
		if err != nil {
			t.Fatal(err)
		}
		same(t, "after damage", got[0], snaps[want])
	}
	// A damaged length: the reader finds the next record by its marker.
	bad = bytes.Clone(data)
	bad[e.off-recordFixed-1+5] = 0xFF
	if r, err = Read(bad); err != nil || r.Len() != 17 {
		t.Fatalf("damaged length: %v, %d steps", err, r.Len())
	}
}

func TestNewerVersion(t *testing.T) {
	data := write(t, 5, series(2, 2, 0))
	data[len(Magic)+1] = Version + 1
	_, err := Read(data)
	var ve *VersionError
	if !errors.As(err, &ve) || ve.Got != Version+1 {
		t.Fatalf("got %v, want a VersionError", err)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "newer locktop") {
		t.Fatalf("not one clear line: %q", err)
	}
	if _, err := Read([]byte("PGDMP....")); !errors.Is(err, ErrNotRecording) {
		t.Fatalf("got %v, want ErrNotRecording", err)
	}
}

func TestCreateRefusesExisting(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rec")
	os.WriteFile(p, []byte("keep"), 0o600)
	if _, err := Create(p, Header{Sources: []string{"PostgreSQL"}}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("got %v, want ErrExist", err)
	}
}

func TestParseAt(t *testing.T) {
	first := time.Date(2026, 1, 15, 23, 50, 0, 0, time.Local)
	last := first.Add(time.Hour)
	cur := first.Add(10 * time.Minute)
	for in, want := range map[string]time.Time{
		"23:55:30":            first.Add(5*time.Minute + 30*time.Second),
		"00:10":               first.Add(20 * time.Minute),
		"90s":                 first.Add(90 * time.Second),
		"+30s":                cur.Add(30 * time.Second),
		"-1m":                 cur.Add(-time.Minute),
		"end":                 last,
		"2026-01-16 00:05:00": first.Add(15 * time.Minute),
	} {
		got, err := ParseAt(in, first, last, cur)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseAt("yesterday", first, last, cur); err == nil {
		t.Error("yesterday parsed")
	}
}
