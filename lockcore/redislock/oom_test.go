package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// The package doc: an error reply (OOM among them) is not ErrUnavailable,
// wraps the reply, and "a nil error always comes with a Lock". Under
// maxmemory 1 + noeviction, an Acquire of a free key must fail with the OOM
// reply and leave no phantom hold once memory is back; a Release of a hold
// taken before OOM must either release (nil, key gone) or fail with the reply
// (never ErrNotHeld while the token still holds the key).
func TestOOMReplyAcquireReleaseNoPhantom(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	l := lockerOn(t, rdb, Options{Owner: "oom", Wait: replyWait})
	ctx := context.Background()

	held, err := l.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	lift := func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") }
	defer lift()
	if err := rdb.Set(ctx, "oom-probe", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("precondition: a plain SET under maxmemory 1 answered %v, want OOM", err)
	}
	if err := held.Extend(ctx, 10*time.Second); err != nil && (errors.Is(err, ErrNotHeld) || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "OOM")) {
		t.Errorf("Extend under OOM: %v; want nil or the OOM reply", err)
	}
	if cause := context.Cause(held.Context()); cause != nil {
		t.Errorf("after Extend under OOM the hold's context is cancelled: %v (the token still holds the key)", cause)
	}

	// Redis may still run the (flagless) scripts under OOM; then the grant
	// must be real: the key held by that token, released by it.
	real := func(what, key string, lk *Lock) {
		t.Helper()
		if h, err := l.IsLocked(ctx, key); err != nil || !h {
			t.Errorf("%s under OOM returned a Lock but the key is held = %v, %v: a nil error without a hold", what, h, err)
		}
		if err := lk.Release(ctx); err != nil && !strings.Contains(err.Error(), "OOM") {
			t.Errorf("%s under OOM: Release of its grant: %v", what, err)
		}
	}
	lk, err := l.Acquire(ctx, "free")
	if err == nil {
		t.Logf("Acquire under OOM granted (Redis ran the script)")
		real("Acquire", "free", lk)
	} else if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("Acquire under OOM: %v; want the OOM reply, not ErrUnavailable/ErrTimeout/ErrLocked", err)
	}
	tk, err := l.TryAcquire(ctx, "free2")
	if err == nil {
		t.Logf("TryAcquire under OOM granted (Redis ran the script)")
		real("TryAcquire", "free2", tk)
	} else if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("TryAcquire under OOM: %v; want the OOM reply", err)
	}

	relErr := held.Release(ctx)
	if relErr != nil && (errors.Is(relErr, ErrNotHeld) || errors.Is(relErr, ErrUnavailable) || !strings.Contains(relErr.Error(), "OOM")) {
		t.Errorf("Release under OOM: %v; want nil or the OOM reply", relErr)
	}
	lift()

	for _, k := range []string{"free", "free2"} {
		if h, err := l.IsLocked(ctx, k); err != nil || h {
			t.Errorf("after OOM lifted, %q (not granted, or released) is held = %v, %v: phantom hold", k, h, err)
		}
	}
	h, err := l.IsLocked(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if relErr == nil && h {
		t.Errorf("Release under OOM returned nil but the key is still held")
	}
	if relErr != nil {
		if !h {
			t.Errorf("Release under OOM failed (%v) yet the key is gone", relErr)
		} else if err := held.Release(ctx); err != nil {
			t.Errorf("Release after OOM lifted: %v", err)
		}
	}
	// The locker works again: a fresh grant, fence above the first.
	again, err := l.TryAcquire(ctx, "held")
	if err != nil {
		t.Fatalf("TryAcquire after OOM lifted: %v", err)
	}
	if again.Fence() <= held.Fence() {
		t.Errorf("fence after OOM %d <= earlier %d", again.Fence(), held.Fence())
	}
	again.Release(ctx)
}
