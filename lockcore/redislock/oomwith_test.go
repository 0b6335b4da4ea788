package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// README.md / with.go: fn's ctx is cancelled with ErrLost only when the hold is
// found lost (an extend found the key gone or taken, a force release, or
// the TTL passed without an extension, erring early by 1% + 2ms). Under
// Redis OOM (maxmemory 1, noeviction) the keep-alive's extends may fail
// with the OOM reply: fn must not be cancelled while the key is still held
// by its token beyond that 1% + 2ms margin.
func TestOOMWithNotCancelledWhileHeld(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	const ttl = 1500 * time.Millisecond
	l := lockerOn(t, rdb, Options{Owner: "oom-with", TTL: ttl, Wait: 2 * time.Second})
	ctx := context.Background()
	lift := func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") }
	defer lift()

	err := l.With(ctx, "k", func(fctx context.Context) error {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		select {
		case <-fctx.Done():
			d := time.Since(start)
			held, ierr := l.IsLocked(ctx, "k")
			t.Logf("fn's ctx cancelled after %v under OOM: %v; key held now = %v (%v)", d, context.Cause(fctx), held, ierr)
			if held {
				// Allow the documented early margin, then look again.
				time.Sleep(100 * time.Millisecond)
				if still, _ := l.IsLocked(ctx, "k"); still {
					t.Errorf("fn cancelled (%v) while the key is still held 100ms later: a false ErrLost under OOM", context.Cause(fctx))
				}
			}
		case <-time.After(3 * ttl):
			held, ierr := l.IsLocked(ctx, "k")
			t.Logf("fn ran %v (3×TTL) under OOM uncancelled; key held = %v (%v)", time.Since(start), held, ierr)
			if ierr == nil && !held {
				t.Errorf("fn not cancelled but the key is no longer held after 3×TTL: ctx lost track of the hold")
			}
		}
		lift()
		return nil
	})
	t.Logf("With returned %v (ErrLost: %v)", err, errors.Is(err, ErrLost))
}
