//go:build attack

package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestAttackSameKeyTwoDBs: one key under one prefix in two logical
// databases of one server is two locks. Pub/sub is not per database (a
// notice published from DB 1 reaches a subscriber of DB 0), so the one
// place they could be confused is the notices: a release and a force
// release in DB 0 must neither hand DB 1's key to its waiter nor end DB 1's
// hold, and DB 1's waiter gets its key once DB 1's holder releases.
func TestAttackSameKeyTwoDBs(t *testing.T) {
	srv := redistest.Private(t)
	ctx := context.Background()
	db := func(n int) *redis.Client {
		c := redistest.ClientOf(t, srv)
		opt := *c.Options()
		opt.DB = n
		d := redis.NewClient(&opt)
		t.Cleanup(func() { d.Close() })
		return d
	}
	zero, one := db(0), db(1)
	holder0 := lockerOn(t, zero, Options{Owner: "holder0"})
	other0 := lockerOn(t, zero, Options{Owner: "other0"})
	holder1 := lockerOn(t, one, Options{Owner: "holder1"})
	waiter1 := lockerOn(t, one, Options{Owner: "waiter1", Wait: 30 * time.Second})

	h0, err := holder0.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	h1, err := holder1.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("DB 1's Acquire of the key DB 0 holds: %v", err)
	}
	// DB 1's holder listens, as in With: a force-release notice meant for
	// DB 0's holder, if confused, would end it.
	held1 := make(chan struct{})
	with1 := make(chan error, 1)
	go func() {
		with1 <- h1.run(ctx, func(fctx context.Context) error {
			close(held1)
			<-fctx.Done()
			return context.Cause(fctx)
		})
	}()
	<-held1
	got := make(chan *Lock, 1)
	werr := make(chan error, 1)
	go func() {
		l, err := waiter1.Acquire(ctx, "k")
		if err != nil {
			werr <- err
			return
		}
		got <- l
	}()
	waitForWaiters(t, holder1, "k", 1)
	if ws := waiters(t, holder0, "k"); len(ws) != 0 {
		t.Fatalf("DB 1's waiter is seen in DB 0: %+v", ws)
	}

	// DB 0: a release, a grant that watches, and its force release.
	if err := h0.Release(ctx); err != nil {
		t.Fatal(err)
	}
	k0, err := other0.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("DB 0's try after DB 0's release: %v", err)
	}
	lost0 := make(chan error, 1)
	go func() {
		lost0 <- k0.run(ctx, func(fctx context.Context) error { <-fctx.Done(); return context.Cause(fctx) })
	}()
	// The force release's notice reaches DB 0's holder while it listens.
	ok, err := holder0.ForceRelease(ctx, "k", "bp12 attack")
	if err != nil || !ok {
		t.Fatalf("ForceRelease in DB 0: %v, %v", ok, err)
	}
	select {
	case err := <-lost0:
		if !errors.Is(err, ErrLost) {
			t.Errorf("DB 0's force-released With: %v, want ErrLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("DB 0's force-released hold still running 30s later")
	}
	select {
	case err := <-with1:
		t.Fatalf("DB 1's hold ended by DB 0's release and force release: %v", err)
	case l := <-got:
		t.Fatalf("DB 1's waiter got the key DB 1's holder holds (fence %d)", l.Fence())
	case err := <-werr:
		t.Fatalf("DB 1's waiter: %v", err)
	default:
	}
	if err := h1.Err(); err != nil {
		t.Fatalf("DB 1's hold after DB 0's force release: %v", err)
	}
	if _, err := h1.TTL(ctx); err != nil {
		t.Fatalf("DB 1's hold in Redis after DB 0's force release: %v", err)
	}
	if ws := waiters(t, holder1, "k"); len(ws) != 1 {
		t.Fatalf("DB 1's waiter after DB 0's release: %+v registrations, want 1", ws)
	}

	// DB 1's own release hands its key to its waiter.
	if err := h1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l.Fence() <= h1.Fence() {
			t.Errorf("DB 1's waiter's fence %d not above its holder's %d", l.Fence(), h1.Fence())
		}
		_ = l.Release(ctx)
	case err := <-werr:
		t.Fatalf("DB 1's waiter after DB 1's release: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("DB 1's waiter did not get the key 20s after DB 1's release")
	}
}
