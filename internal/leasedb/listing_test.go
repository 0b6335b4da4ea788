package leasedb

import (
	"strconv"
	"testing"
	"time"
)

// listing returns n holders and n/10 waiters over n resources, in no
// particular order, as a table scan returns them.
func listing(n int) *Listing {
	now := time.Now()
	l := &Listing{Now: now}
	for i := range n {
		id := "map:m" + strconv.Itoa((i*7919)%n)
		l.Entries = append(l.Entries, holder(id, "write", "o", int64(i), now.Add(time.Minute), now, now, time.Second, "{}", false, now))
		if i%10 == 0 {
			l.Entries = append(l.Entries, Entry{LockID: id, Mode: "read", Owner: "w2", Since: now.Add(time.Duration(i)), LeaseExpires: now.Add(time.Minute)},
				Entry{LockID: id, Mode: "read", Owner: "w1", Since: now, LeaseExpires: now.Add(time.Minute)})
		}
	}
	return l
}

// The order is the lock order (levels, then lock_id), holders first,
// then waiters by since, each with its place in the queue; ages are by
// the listing's clock.
func TestFinish(t *testing.T) {
	now := time.Now()
	l := &Listing{Now: now, Entries: []Entry{
		{LockID: "sketch:a", Granted: true, Since: now},
		{LockID: "map:b", Owner: "late", Since: now.Add(2)},
		{LockID: "map:b", Owner: "early", Since: now.Add(1)},
		{LockID: "map:b", Granted: true, Since: now.Add(3), LeaseExpires: now.Add(time.Second), Heartbeat: now.Add(-time.Second)},
		{LockID: "project:z", Granted: true, Since: now},
		{LockID: "odd", Granted: true, Since: now},
	}}
	l.finish()
	var got []string
	for _, e := range l.Entries {
		got = append(got, e.LockID+"/"+e.Owner+"/"+e.Level+"/"+strconv.Itoa(e.Position))
	}
	want := []string{"odd///0", "project:z//PROJECT/0", "map:b//MAP/0", "map:b/early/MAP/1", "map:b/late/MAP/2", "sketch:a//SKETCH/0"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if h := l.Entries[2]; h.LeaseLeft != time.Second || h.HeartbeatAge != time.Second {
		t.Errorf("ages %s %s", h.LeaseLeft, h.HeartbeatAge)
	}
}

// BenchmarkFinish is the client's share of a listing of 1,000 leases
// beyond decoding: levels, order, ages, positions.
func BenchmarkFinish(b *testing.B) {
	src := listing(1000)
	l := &Listing{Now: src.Now}
	for b.Loop() {
		l.Entries = append(l.Entries[:0], src.Entries...)
		l.finish()
	}
}

// The order of a large listing is the order a plain sort gives.
func TestFinishLarge(t *testing.T) {
	l := listing(1000)
	l.finish()
	for i := 1; i < len(l.Entries); i++ {
		a, b := l.Entries[i-1], l.Entries[i]
		if a.LockID > b.LockID || a.LockID == b.LockID && (!a.Granted && b.Granted || a.Granted == b.Granted && a.Since.After(b.Since)) {
			t.Fatalf("out of order at %d: %+v then %+v", i, a, b)
		}
	}
	if n := len(l.Entries); n != 1200 {
		t.Fatalf("%d entries, want 1200", n)
	}
	seen := map[string]int{}
	for _, e := range l.Entries {
		seen[e.LockID+"/"+e.Owner]++
	}
	if len(seen) != 1200 {
		t.Errorf("%d distinct entries after the sort, want 1200", len(seen))
	}
}
