package recording

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/model"
)

// A recording made with QueryText "normalized" or "none" never holds a
// literal of a session's query: the text is changed before it is encoded.
func TestQueryTextInRecording(t *testing.T) {
	const secret = "a@b.c"
	snap := model.Snapshot{Taken: t0, Locks: []model.Lock{{
		Kind: model.KindAdvisory, PID: 7, Mode: model.ModeExclusive, Granted: true,
		Backend: &model.Backend{Query: "SELECT * FROM users WHERE email = '" + secret + "'"},
	}}}
	for _, tc := range []struct{ mode, want string }{
		{"", snap.Locks[0].Session().Query},
		{"full", snap.Locks[0].Session().Query},
		{"normalized", "SELECT * FROM users WHERE email = $1"},
		{"none", ""},
	} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Header{Sources: []string{"PostgreSQL"}, Start: t0, Interval: time.Second, QueryText: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(0, snap); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := Read(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.At(0)
		if err != nil {
			t.Fatal(err)
		}
		if q := got[0].Locks[0].Session().Query; q != tc.want {
			t.Errorf("QueryText %q: recorded query %q, want %q", tc.mode, q, tc.want)
		}
		if snap.Locks[0].Session().Query == "" || !strings.Contains(snap.Locks[0].Session().Query, secret) {
			t.Fatalf("QueryText %q: Write changed the caller's snapshot", tc.mode)
		}
	}
	if _, err := NewWriter(&bytes.Buffer{}, Header{Sources: []string{"PostgreSQL"}, QueryText: "some"}); err == nil {
		t.Error("NewWriter with QueryText \"some\": no error")
	}
}
