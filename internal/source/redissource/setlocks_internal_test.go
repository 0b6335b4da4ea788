package redissource

import (
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/model"
)

// Issue 26: a poll built each row's name (prefix + key) anew, an
// allocation per lock; the reader keeps the whole key it listed
// (Info.Name), and a holder's row is set without allocating.
func TestSetLocksDoesNotBuildTheName(t *testing.T) {
	in := redislocks.Info{Key: "a:b", Name: "sesslock:a:b", Owner: "o", Token: "ABCDEF", Fence: 7, TTL: time.Minute}
	out := make([]model.Lock, 1)
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() { setLocks(out, &in, now) }); n != 0 {
		t.Errorf("setLocks allocated %v times for a lock without waiters, want 0", n)
	}
	if out[0].Name != "sesslock:a:b" || out[0].Owner != "o" || out[0].Fence != 7 {
		t.Errorf("row %+v", out[0])
	}
}
