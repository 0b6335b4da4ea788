package redissource_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// A held session mutex with a waiter, and a key set by another client with
// SET … PX (the seed's own way), show as redis locks: owner, token prefix,
// fence and TTL for the holder, the waiter in its place behind it.
func TestPollShowsHoldersAndWaiters(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := "srctest" + strings.ReplaceAll(t.Name(), "/", "") + ":"
	a := redislock.New(rdb, redislock.Options{Prefix: prefix, Owner: "brain-a", TTL: 30 * time.Second})
	b := redislock.New(redistest.Client(t), redislock.Options{Prefix: prefix, Owner: "brain-b", TTL: 30 * time.Second})
	defer a.Close()
	defer b.Close()
	key := redislock.SessionKey("t1", "a1", "c1", "web")
	held, err := a.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if l, err := b.Acquire(wctx, key); err == nil {
			_ = l.Release(context.Background())
		}
	}()
	defer func() { cancel(); <-done }()
	if err := rdb.Set(ctx, prefix+"t2:a2:c2:sms", "0123456789abcdef", 20*time.Second).Err(); err != nil {
		t.Fatal(err)
	}

	src := redissource.New(redis.NewClient(redistest.Options(t)), redissource.Options{Prefix: prefix})
	defer src.Close()
	var snap model.Snapshot
	deadline := time.Now().Add(10 * time.Second)
	for {
		snap, err = src.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Locks) == 3 || time.Now().After(deadline) {
			break
		}
	}
	if len(snap.Locks) != 3 {
		t.Fatalf("locks %+v", snap.Locks)
	}
	h, w, plain := snap.Locks[0], snap.Locks[1], snap.Locks[2]
	name := prefix + key
	if h.Kind != model.KindRedis || h.Name != name || h.KeyLabel() != name || h.Owner != "brain-a" || !h.Granted ||
		h.Fence != held.Fence() || len(h.Token) != 6 || h.PID != 0 || h.Left(snap.Taken) <= 25*time.Second || h.HeldSince.IsZero() {
		t.Errorf("holder %+v", h)
	}
	if w.Granted || w.Owner != "brain-b" || w.QueuePos != 1 || w.Name != name || w.WaitStart.IsZero() ||
		len(w.BlockedByOwners) != 1 || w.BlockedByOwners[0] != "brain-a" {
		t.Errorf("waiter %+v", w)
	}
	if plain.Name != prefix+"t2:a2:c2:sms" || plain.Token != "012345" || !plain.Granted || plain.Left(snap.Taken) <= 15*time.Second {
		t.Errorf("plain key %+v", plain)
	}
	// The same holder reads the same from poll to poll (absolute times).
	again, err := src.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.Locks[0].Expires != h.Expires && again.Locks[0].Expires.Sub(h.Expires).Abs() > 20*time.Millisecond {
		t.Errorf("expiry moved: %v then %v", h.Expires, again.Locks[0].Expires)
	}
}

// A Redis that does not answer is this source's error, one line, within
// the poll's deadline.
func TestPollFailsAlone(t *testing.T) {
	src, err := redissource.Open("unix:///nonexistent/redis.sock", redissource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := src.Poll(ctx); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("poll of a missing Redis: %v", err)
	}
	if _, err := redissource.Open("redis://u:s3cret@[bad", redissource.Options{}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("bad URL: %v", err)
	}
}

// On a Cluster, named by one node's URL, the source reads every primary:
// locks on every node are listed, and a limit below them says Truncated.
func TestPollCluster(t *testing.T) {
	ctx := context.Background()
	cc := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	l := redislock.New(cc, redislock.Options{Prefix: prefix, Owner: "cl", TTL: time.Minute})
	defer l.Close()
	nodes := map[int64]bool{}
	var keys []string
	for i := 0; len(nodes) < 3 || len(keys) < 9; i++ {
		k := redislock.SessionKey(fmt.Sprint("t", i), "a", "c", "web")
		slot, err := cc.ClusterKeySlot(ctx, prefix+k).Result()
		if err != nil {
			t.Fatal(err)
		}
		nodes[slot*3/16384] = true
		held, err := l.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		defer held.Release(ctx)
		keys = append(keys, prefix+k)
	}
	slices.Sort(keys)
	src, err := redissource.Open("redis://"+cc.Options().Addrs[0], redissource.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	snap, err := src.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lk := range snap.Locks {
		got = append(got, lk.Name)
		if lk.Owner != "cl" || lk.Fence == 0 || lk.Expires.IsZero() {
			t.Errorf("lock %+v", lk)
		}
	}
	if !slices.Equal(got, keys) || snap.Truncated || len(snap.Partial) != 0 {
		t.Errorf("listed %v (truncated %v, partial %v), want %v", got, snap.Truncated, snap.Partial, keys)
	}
	small, err := redissource.Open("redis://"+cc.Options().Addrs[0], redissource.Options{Prefix: prefix, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if snap, err := small.Poll(ctx); err != nil || len(snap.Locks) != 4 || !snap.Truncated {
		t.Errorf("limit 4: %d locks, truncated %v, %v", len(snap.Locks), snap.Truncated, err)
	}
}
