package redissource_test

import (
	"context"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
)

// Issue 26: beyond its bare read (the same commands, replies decoded by
// go-redis), a poll allocated each lock three times over: its row, and two
// copies of the reader's Info (a page's, then the table's), which the
// garbage collector freed every poll. Heap allocated per poll is client
// CPU (this process's GC and its scavenger): past the bare read's, a poll
// now allocates its rows and little else.
func TestPollAllocatesItsRowsBeyondTheBareRead(t *testing.T) {
	const n = 300
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := redislock.New(rdb, redislock.Options{Prefix: prefix, TTL: 10 * time.Minute, Owner: "alloc"})
	defer l.Close()
	for i := range n {
		if _, err := l.TryAcquire(ctx, "alloc:"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	src := redissource.New(redistest.Client(t), redissource.Options{Prefix: prefix})
	defer src.Close()
	poll := func() {
		if snap, err := src.Poll(ctx); err != nil || len(snap.Locks) != n {
			t.Fatalf("poll: %d locks, %v", len(snap.Locks), err)
		}
	}
	bare := func() {
		if got, err := redislocks.BareRead(ctx, rdb, prefix); err != nil || got != n {
			t.Fatalf("bare read: %d holds, %v", got, err)
		}
	}
	pollB, bareB := bytesPerRun(poll), bytesPerRun(bare)
	rows := n * int(unsafe.Sizeof(model.Lock{}))
	t.Logf("a poll of %d locks allocates %d bytes, its bare read %d, its rows %d", n, pollB, bareB, rows)
	// Slack: 64 bytes a lock, less than half an Info.
	if extra := pollB - bareB; extra > rows+n*64 {
		t.Errorf("a poll of %d locks allocated %d bytes, its bare read %d: %d more, want at most the rows' %d + %d",
			n, pollB, bareB, extra, rows, n*64)
	}
}

// bytesPerRun is the heap f allocates a call, the median of 5 after 2
// that warm it up.
func bytesPerRun(f func()) int {
	f()
	f()
	var runs [5]int
	for i := range runs {
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		runs[i] = int(b.TotalAlloc - a.TotalAlloc)
	}
	slices.Sort(runs[:])
	return runs[len(runs)/2]
}
