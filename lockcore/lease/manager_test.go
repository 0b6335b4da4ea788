package lease

import (
	"context"
	"errors"
	"testing"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// The Manager: its listing and metadata, and Close (the suite).

func testListing(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	r := Map("listed")
	l := acquire(t, ctxT(t), a, r, Write)
	if err := l.SetMetadata(ctxT(t), map[string]any{"op": "calibrate", "n": 3}); err != nil {
		t.Fatal(err)
	}
	go func() {
		if w, err := b.Acquire(ctxT(t), r, Read); err == nil {
			_ = w.Release(context.Background())
		}
	}()
	pgtest.Eventually(t, "a waiter", func() bool { return waiting(t, a, r, Read) })
	go func() {
		if w, err := b.Acquire(ctxT(t), r, Write); err == nil {
			_ = w.Release(context.Background())
		}
	}()
	pgtest.Eventually(t, "a second waiter", func() bool { return waiting(t, a, r, Write) })
	locks, err := a.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(locks) != 3 {
		t.Fatalf("listed %+v", locks)
	}
	h, w, w2 := locks[0], locks[1], locks[2]
	now := h.LeaseExpires.Add(-h.LeaseLeft) // the database's clock at the listing
	if !h.Granted || h.Owner != "A" || h.Mode != Write || h.Fence != l.Fence() || h.Metadata["op"] != "calibrate" ||
		h.Stale || h.Since.After(now) || h.Position != 0 || h.LeaseLeft <= 0 ||
		!h.Heartbeat.Add(h.HeartbeatAge).Equal(now) || h.HeartbeatAge < 0 {
		t.Errorf("holder %+v (now %s)", h, now)
	}
	if w.Granted || w.Owner != "B" || w.Mode != Read || w.Since.IsZero() || w.Position != 1 || w.LeaseLeft <= 0 ||
		!w.LeaseExpires.Add(-w.LeaseLeft).Equal(now) {
		t.Errorf("waiter %+v", w)
	}
	if w2.Granted || w2.Mode != Write || w2.Position != 2 || w2.Since.Before(w.Since) {
		t.Errorf("second waiter %+v", w2)
	}
	release(t, l)
}

func testCloseReleases(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	l := acquire(t, ctxT(t), a, Map("closing"), Write)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), ErrReleased) {
		t.Errorf("after Close: %v", l.Err())
	}
	if tryFails(t, b, Map("closing"), Write) {
		t.Error("Close left the lock held")
	}
	if _, err := a.Acquire(ctxT(t), Map("x"), Read); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close: %v", err)
	}
}
