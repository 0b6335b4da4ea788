package redislocks

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/lockcore/registry"
)

func locker(t *testing.T, rdb redis.UniversalClient, opts redislock.Options) *redislock.Locker {
	t.Helper()
	l := redislock.New(rdb, opts)
	t.Cleanup(func() { l.Close() })
	return l
}

// Read lists held locks with owner, fence, token prefix, TTL and the
// waiters in order, reading with SCAN under the prefix only.
func TestRead(t *testing.T) {
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := locker(t, rdb, redislock.Options{Prefix: prefix, Owner: "holder"})
	ctx := context.Background()
	if tbl, err := Read(ctx, rdb, prefix, 0); err != nil || len(tbl.Locks) != 0 || tbl.Truncated {
		t.Fatalf("Read with nothing held = %+v, %v", tbl, err)
	}
	var locks []*redislock.Lock
	for i := range 5 {
		k, err := l.Acquire(ctx, fmt.Sprintf("k%d", i), lockcore.TTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, k)
	}
	// Something else under the prefix, and a lock under another prefix.
	rdb.Set(ctx, prefix+"note", "x", time.Minute)
	locker(t, rdb, redislock.Options{Prefix: redistest.Prefix(t)}).Acquire(ctx, "elsewhere")

	w := locker(t, redistest.Client(t), redislock.Options{Prefix: prefix, Owner: "waiter"})
	done := make(chan error, 1)
	go func() {
		k, err := w.Acquire(ctx, "k0", lockcore.Wait(30*time.Second))
		if err == nil {
			err = k.Release(ctx)
		}
		done <- err
	}()
	var ws []Waiter
	pgtest.Eventually(t, "k0 has a waiter", func() bool {
		tbl, err := Read(ctx, rdb, prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		ws = nil
		if len(tbl.Locks) > 0 && tbl.Locks[0].Key == "k0" {
			ws = tbl.Locks[0].Waiters
		}
		return len(ws) == 1
	})
	if ws[0].Owner != "waiter" || len(ws[0].Token) != 6 || time.Since(ws[0].Since) > time.Minute {
		t.Errorf("waiter %+v", ws[0])
	}

	tbl, err := Read(ctx, rdb, prefix, 0)
	if err != nil || len(tbl.Locks) != 5 || tbl.Truncated || time.Since(tbl.Taken).Abs() > time.Minute {
		t.Fatalf("Read = %d locks (truncated %v, taken %v), %v; want 5", len(tbl.Locks), tbl.Truncated, tbl.Taken, err)
	}
	for i, in := range tbl.Locks {
		k := locks[i]
		if in.Key != k.Key() || in.Owner != "holder" || in.Fence != k.Fence() || in.Token != k.Token()[:6] ||
			in.TTL <= 0 || in.TTL > time.Minute || time.Since(in.Since) > time.Minute || in.Pattern != registry.OtherPattern {
			t.Errorf("info %d = %+v; lock %s fence %d", i, in, k.Key(), k.Fence())
		}
	}
	if lim, err := Read(ctx, rdb, prefix, 2); err != nil || len(lim.Locks) != 2 || !lim.Truncated {
		t.Errorf("Read with limit 2 = %d locks (truncated %v), %v", len(lim.Locks), lim.Truncated, err)
	}
	if all, err := Read(ctx, rdb, prefix, 5); err != nil || len(all.Locks) != 5 {
		t.Errorf("Read with limit 5 = %d locks, %v", len(all.Locks), err)
	}
	locks[0].Release(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// scripts counts the scripts (EVAL, EVALSHA) and SCANs a client sends, in
// pipelines too, and the round trips (a connection's own set-up, HELLO and
// CLIENT SETINFO, left out).
type scripts struct{ n, scans, trips atomic.Int64 }

func (s *scripts) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scripts) count(cmds ...redis.Cmder) {
	trip := false
	for _, c := range cmds {
		switch c.Name() {
		case "hello", "client":
			continue
		case "eval", "evalsha":
			s.n.Add(1)
		case "scan":
			s.scans.Add(1)
		}
		trip = true
	}
	if trip {
		s.trips.Add(1)
	}
}
func (s *scripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.count(cmd)
		return next(ctx, cmd)
	}
}
func (s *scripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.count(cmds...)
		return next(ctx, cmds)
	}
}

// Issue 26: Read ran a script per page that read every key from Lua, where
// Redis spends about three times the CPU per command. Holds are now read
// by a pipeline, one round trip per page, with no script at all.
func TestReadHoldsWithoutScript(t *testing.T) {
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	l := locker(t, redistest.Client(t), redislock.Options{Prefix: prefix})
	for i := range 3 {
		if _, err := l.TryAcquire(ctx, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(redistest.Client(t).Options())
	defer rdb.Close()
	var s scripts
	rdb.AddHook(&s)
	tbl, err := Read(ctx, rdb, prefix, 0)
	if err != nil || len(tbl.Locks) != 3 {
		t.Fatalf("Read = %d locks, %v", len(tbl.Locks), err)
	}
	if s.n.Load() != 0 {
		t.Errorf("Read sent %d scripts to read 3 holds, want none", s.n.Load())
	}
	// The first SCAN alone, then one pipeline per page (with the next SCAN).
	if trips, pages := s.trips.Load(), s.scans.Load(); trips != pages+1 {
		t.Errorf("Read took %d round trips for %d pages, want %d", trips, pages, pages+1)
	}
}

// A hold written by a redislock that kept neither the token's first
// characters (p) nor the expiry (e) in it is read all the same, its token
// cut in Redis; so is a plain string key.
func TestReadOlderHold(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	rdb.HSet(ctx, prefix+"old", "t", "abcdefghijklmnop", "f", "42", "o", "before", "s", "1700000000000", "c", "ch")
	rdb.PExpire(ctx, prefix+"old", time.Minute)
	rdb.Set(ctx, prefix+"plain", "0123456789", time.Minute)
	tbl, err := Read(ctx, rdb, prefix, 0)
	if err != nil || len(tbl.Locks) != 1 || len(tbl.Strings) != 1 {
		t.Fatalf("Read = %+v, %v", tbl, err)
	}
	in := tbl.Locks[0]
	if in.Key != "old" || in.Token != "abcdef" || in.Fence != 42 || in.Owner != "before" ||
		in.TTL <= 0 || in.TTL > time.Minute || !in.Since.Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("older hold read as %+v", in)
	}
	if s := tbl.Strings[0]; s.Key != "plain" || s.Token != "012345" || s.TTL <= 0 || s.TTL > time.Minute {
		t.Errorf("string key read as %+v", s)
	}
}

// BareRead, the baseline of Read's cost, reads the holds Read lists: the
// same commands, sent bare.
func TestBareReadReadsWhatReadLists(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	l := locker(t, rdb, redislock.Options{Prefix: prefix})
	for i := range 3 {
		if _, err := l.TryAcquire(ctx, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	rdb.Set(ctx, prefix+"plain", "x", time.Minute)
	tbl, err := Read(ctx, rdb, prefix, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := BareRead(ctx, rdb, prefix); err != nil || n != len(tbl.Locks)+len(tbl.Strings) {
		t.Errorf("BareRead = %d keys, %v; Read listed %d locks and %d strings", n, err, len(tbl.Locks), len(tbl.Strings))
	}
}

// names counts the commands a client sends by name, in pipelines too.
type names struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *names) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *names) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.add(cmd)
		return next(ctx, cmd)
	}
}
func (s *names) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.add(cmds...)
		return next(ctx, cmds)
	}
}
func (s *names) add(cmds ...redis.Cmder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cmds {
		s.n[c.Name()]++
	}
}

// take returns the counts of the named commands and starts again.
func (s *names) take(name ...string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, len(name))
	for i, n := range name {
		out[i] = s.n[n]
	}
	s.n = map[string]int{}
	return out
}

// A waiters' queue is read by the script's SHA1 (EVALSHA), not the whole
// script each time; a node without it cached (here after SCRIPT FLUSH, as
// after a restart or a failover) answers NOSCRIPT, and Read reads that
// queue with EVAL in its second round trip, listing its waiters all the
// same. So does BareRead, its baseline.
func TestReadQueueBySHA(t *testing.T) {
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	l := locker(t, redistest.Client(t), redislock.Options{Prefix: prefix, Owner: "holder"})
	k, err := l.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	w := locker(t, redistest.Client(t), redislock.Options{Prefix: prefix, Owner: "waiter"})
	done := make(chan error, 1)
	go func() {
		k, err := w.Acquire(ctx, "k", lockcore.Wait(30*time.Second))
		if err == nil {
			err = k.Release(ctx)
		}
		done <- err
	}()
	rdb := redis.NewClient(redistest.Client(t).Options())
	defer rdb.Close()
	s := &names{n: map[string]int{}}
	rdb.AddHook(s)
	waiters := func() int {
		tbl, err := Read(ctx, rdb, prefix, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(tbl.Locks) != 1 {
			return 0
		}
		return len(tbl.Locks[0].Waiters)
	}
	pgtest.Eventually(t, "k has a waiter", func() bool { return waiters() == 1 })

	for _, flush := range []bool{true, false} {
		if flush {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		s.take()
		if n := waiters(); n != 1 {
			t.Errorf("flushed %v: Read listed %d waiters, want 1", flush, n)
		}
		want := []int{1, 0}
		if flush {
			want = []int{1, 1}
		}
		if got := s.take("evalsha", "eval"); !slices.Equal(got, want) {
			t.Errorf("flushed %v: Read sent %d EVALSHA and %d EVAL, want %v", flush, got[0], got[1], want)
		}
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := BareRead(ctx, rdb, prefix); err != nil || n != 1 {
		t.Errorf("BareRead after SCRIPT FLUSH = %d keys, %v; want the hold", n, err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
