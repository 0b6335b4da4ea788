package redislocks

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
)

// A Reader reads what Read reads, read after read, though it reuses the
// last read's memory: over more than one SCAN page, with waiters, then
// with fewer locks and none waiting, and cut at a limit. (Which locks a
// limit keeps depends on SCAN's pages, which the other keys of the test
// server move: the reads compared have room for every lock.)
func TestReaderReadsAsRead(t *testing.T) {
	const n = 1200 // over SCAN's COUNT: two pages at least
	const all = 2 * n
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := locker(t, rdb, redislock.Options{Prefix: prefix, Owner: "holder", TTL: time.Minute})
	locks := make([]*redislock.Lock, n)
	for i := range locks {
		k, err := l.TryAcquire(ctx, fmt.Sprintf("k%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		locks[i] = k
	}
	rdb.Set(ctx, prefix+"plain", "0123456789", time.Minute)
	w := locker(t, redistest.Client(t), redislock.Options{Prefix: prefix, Owner: "waiter"})
	done := make(chan error, 1)
	go func() {
		k, err := w.Acquire(ctx, "k0500", lockcore.Wait(30*time.Second))
		if err == nil {
			err = k.Release(ctx)
		}
		done <- err
	}()
	var r Reader
	same := func(what string) Table {
		t.Helper()
		got, err := r.Read(ctx, rdb, prefix, all)
		if err != nil {
			t.Fatalf("%s: Reader.Read: %v", what, err)
		}
		want, err := Read(ctx, rdb, prefix, all)
		if err != nil {
			t.Fatalf("%s: Read: %v", what, err)
		}
		if !reflect.DeepEqual(untimed(got), untimed(want)) {
			t.Errorf("%s: the Reader read %d locks (%d waiting on the first), Read %d (%d)", what,
				len(got.Locks), len(got.Locks[0].Waiters), len(want.Locks), len(want.Locks[0].Waiters))
		}
		return want
	}
	pgtest.Eventually(t, "k0500 has a waiter", func() bool {
		tbl, err := r.Read(ctx, rdb, prefix, all)
		if err != nil {
			t.Fatal(err)
		}
		return len(tbl.Locks) == n && tbl.Locks[500].Key == "k0500" && len(tbl.Locks[500].Waiters) == 1
	})
	same("1,200 locks, one waiting")
	same("1,200 locks, one waiting, read again")

	// The waiter takes k0500 and lets it go: fewer locks, none waiting.
	if err := locks[500].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, k := range locks[:700] {
		if err := k.Release(ctx); err != nil && k.Key() != "k0500" {
			t.Fatal(err)
		}
	}
	full := untimed(same("500 locks"))
	if len(full.Locks) != n-700 || full.Locks[0].Key != "k0700" || len(full.Locks[0].Waiters) != 0 {
		t.Fatalf("read %d locks, the first %s with %d waiters; want %d from k0700, none waiting",
			len(full.Locks), full.Locks[0].Key, len(full.Locks[0].Waiters), n-700)
	}
	cut, err := r.Read(ctx, rdb, prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	cut = untimed(cut)
	if len(cut.Locks) != 3 || !cut.Truncated {
		t.Fatalf("a limit of 3 read %d locks, truncated %v", len(cut.Locks), cut.Truncated)
	}
	for _, in := range cut.Locks {
		if i := slices.IndexFunc(full.Locks, func(f Info) bool { return f.Key == in.Key }); i < 0 || !reflect.DeepEqual(in, full.Locks[i]) {
			t.Errorf("a limit of 3 read %+v; the full read has it as %+v", in, full.Locks[max(i, 0)])
		}
	}
	same("500 locks again")
}

// untimed is t without what moves between two reads: the clock, the TTLs.
func untimed(t Table) Table {
	t.Taken = time.Time{}
	t.Locks = append([]Info(nil), t.Locks...)
	for i := range t.Locks {
		t.Locks[i].TTL = 0
	}
	t.Strings = append([]StringKey(nil), t.Strings...)
	for i := range t.Strings {
		t.Strings[i].TTL = 0
	}
	return t
}

// Between reads a Reader keeps its memory, not the commands it sent: kept,
// go-redis's replies to them (700 bytes a key) stayed on the heap until
// the next read, for every GC cycle to mark.
func TestReaderKeepsNoCommands(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := locker(t, rdb, redislock.Options{Prefix: prefix})
	for i := range 10 {
		if _, err := l.TryAcquire(ctx, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var r Reader
	if tbl, err := r.Read(ctx, rdb, prefix, 0); err != nil || len(tbl.Locks) != 10 {
		t.Fatalf("Read = %d locks, %v", len(tbl.Locks), err)
	}
	kept := 0
	for _, s := range r.free {
		for _, rd := range s.reads[:cap(s.reads)] {
			if rd.hold != nil || rd.queue != nil {
				kept++
			}
		}
	}
	if kept > 0 {
		t.Errorf("the Reader keeps %d commands after its read, want none", kept)
	}
}
