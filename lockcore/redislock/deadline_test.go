package redislock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// TestLocalDeadlineNotPastServerEnd: a holder never believes it holds past the server's lease
// end. Redis and this test share a host clock, so the hold's 'e' field
// (Redis ms when the lease ends) can be compared with the Lock's local
// deadline after a grant, an extend, a hand-over's take-up and a Resume.
func TestLocalDeadlineNotPastServerEnd(t *testing.T) {
	ctx := context.Background()
	// Long enough that no step outlasts it on a loaded box (each step
	// must find the hold alive); the check does not depend on its length.
	const ttl = 10 * time.Second
	a := newLocker(t, Options{Owner: "a"})
	b := lockerOn(t, a.rdb, Options{Owner: "b", Prefix: a.prefix})
	check := func(what string, k *Lock) {
		t.Helper()
		k.mu.Lock()
		dl := k.deadline
		k.mu.Unlock()
		e, err := a.rdb.HGet(ctx, k.ks.hold, "e").Result()
		if err != nil {
			t.Fatalf("%s: reading e: %v", what, err)
		}
		ems, _ := strconv.ParseInt(e, 10, 64)
		server := time.UnixMilli(ems)
		if dl.After(server) {
			t.Errorf("%s: local deadline %v is %v past the server's lease end", what, dl, dl.Sub(server))
		}
	}
	k, err := a.Acquire(ctx, "k", lockcore.TTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	check("grant", k)
	if err := k.Extend(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	check("extend", k)
	r, err := a.Resume(ctx, "k", k.token)
	if err != nil {
		t.Fatal(err)
	}
	check("resume", r)
	got := make(chan *Lock, 1)
	go func() {
		w, err := b.Acquire(ctx, "k", lockcore.TTL(ttl), lockcore.Wait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(100 * time.Millisecond)
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-got
	if w == nil {
		return
	}
	check("hand-over", w)
	if w.takeup != nil {
		<-w.takeup
	}
	check("take-up", w)
}
