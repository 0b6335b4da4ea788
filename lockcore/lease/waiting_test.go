package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// Waiting: writer precedence, wake-ups on release, tries and timeouts
// (the suite).

func testWriterNotStarved(t *testing.T, e *env) {
	a, b, w := e.open(Options{Owner: "readers"}), e.open(Options{Owner: "probe"}), e.open(Options{Owner: "writer"})
	r := Map("busy")
	first := acquire(t, ctxT(t), a, r, Read)
	got := make(chan error, 1)
	var wl *Lock
	go func() {
		var err error
		wl, err = w.Acquire(ctxT(t), r, Write)
		got <- err
	}()
	pgtest.Eventually(t, "the writer waits", func() bool { return waiting(t, b, r, Write) })
	// A reader arriving now would overlap the first one; it waits instead.
	if !tryFails(t, b, r, Read) {
		t.Fatal("a new reader got in ahead of a waiting writer")
	}
	// A stream of readers that would always overlap, keeping the resource
	// read-locked forever without writer precedence.
	ctx, stop := context.WithCancel(ctxT(t))
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := a.Acquire(ctx, r, Read)
				if err != nil {
					continue
				}
				time.Sleep(20 * time.Millisecond) // the reader's work
				_ = l.Release(context.Background())
			}
		}()
	}
	release(t, first)
	err := <-got
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	release(t, wl)
}

func testWaiterWokenOnRelease(t *testing.T, e *env) {
	// A waiter is woken by the release, not by its backoff: with a backoff
	// cap of 1s (Lease 10s), eight hand-overs in a row would take seconds.
	// The last waiter's Wait covers all eight hand-overs, each two commits
	// queued behind the others' retries: a loaded CI box has taken over
	// 10s for them (SQLite under -race), so the bound is the step's 30s
	// (ctxT), which a healthy run never comes near.
	o := Options{Lease: 10 * time.Second, Heartbeat: time.Second, Wait: 30 * time.Second}
	m := e.open(o)
	r := Sketch("relay")
	var order []int
	var mu sync.Mutex
	first := acquire(t, ctxT(t), m, r, Write)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := acquire(t, ctxT(t), m, r, Write)
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			release(t, l)
		}()
	}
	pgtest.Eventually(t, "eight waiters", func() bool {
		infos, _ := m.Locks(ctxT(t))
		return len(infos) == 9
	})
	start := time.Now()
	release(t, first)
	wg.Wait()
	if len(order) != 8 {
		t.Fatalf("%d of 8 waiters got the lock", len(order))
	}
	t.Logf("eight hand-overs in %s", time.Since(start))
}

func testTryAndTimeout(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B", Wait: 200 * time.Millisecond})
	r := Project("held")
	l := acquire(t, ctxT(t), a, r, Write)
	if got, err := b.TryAcquire(ctxT(t), r, Read); got != nil || !errors.Is(err, ErrLocked) {
		t.Errorf("TryAcquire: %v, %v", got, err)
	}
	start := time.Now()
	if _, err := b.Acquire(ctxT(t), r, Read); !errors.Is(err, ErrTimeout) {
		t.Errorf("Acquire: %v, want ErrTimeout", err)
	}
	if w := time.Since(start); w < 200*time.Millisecond {
		t.Errorf("gave up after %s", w)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	go func() {
		pgtest.Eventually(t, "a waiter", func() bool { return waiting(t, a, r, Read) })
		cancel()
	}()
	if _, err := e.open(Options{Owner: "C"}).Acquire(ctx, r, Read); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire cancelled: %v", err)
	}
	pgtest.Eventually(t, "the cancelled waiter's row removed", func() bool { return !waiting(t, a, r, Read) })
	release(t, l)
	if err := l.Release(ctxT(t)); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if !errors.Is(l.Err(), ErrReleased) || !errors.Is(context.Cause(l.Context()), ErrReleased) {
		t.Errorf("after Release: Err %v, cause %v", l.Err(), context.Cause(l.Context()))
	}
	if _, err := a.Acquire(ctxT(t), Resource{LevelMap, "a:b"}, Read); err == nil {
		t.Error("a resource id with ':' was accepted")
	}
}
