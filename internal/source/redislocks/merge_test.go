package redislocks

import (
	"strconv"
	"testing"
	"time"
)

// A registration is alive to the lock's scripts while its deadline (ms) is
// at or after the server's clock in whole milliseconds: the reader says the
// same, also within the deadline's own millisecond, so a waiter it leaves
// out is one a release would skip too.
func TestMergeWaiterAliveInItsLastMillisecond(t *testing.T) {
	dl := time.UnixMilli(1_700_000_000_000)
	reg := func(d time.Time) string { return strconv.FormatInt(d.UnixMilli(), 10) + " 3000 ch owner" }
	p := nodePages{
		addr:  "r:6379",
		taken: dl.Add(500 * time.Microsecond),
		holds: [][]Info{{{Key: "k"}}},
		queues: map[string][]queued{"k": {
			{tok: "LAST", reg: reg(dl)},                        // its last millisecond
			{tok: "GONE", reg: reg(dl.Add(-time.Millisecond))}, // passed
		}},
	}
	tbl, err := new(Reader).merge([]nodePages{p}, "p:", 10)
	if err != nil {
		t.Fatal(err)
	}
	if ws := tbl.Locks[0].Waiters; len(ws) != 1 || ws[0].Token != "LAST" {
		t.Errorf("waiters %+v, want LAST only", ws)
	}
}
