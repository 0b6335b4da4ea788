//go:build attack

package redislock

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// makeLoading reloads srv's dataset slowly (DEBUG RELOAD, 40000 filler keys
// loaded 100µs apart, events served every kB), so every other command is
// answered LOADING for seconds; it returns once srv says LOADING, and the
// returned channel closes when the reload is over.
func makeLoading(t *testing.T, srv *redisserver.Server) <-chan struct{} {
	t.Helper()
	ctx := context.Background()
	admin := redistest.ClientOf(t, srv)
	for _, kv := range [][2]string{{"key-load-delay", "100"}, {"loading-process-events-interval-bytes", "1024"}} {
		if err := admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	pipe := admin.Pipeline()
	for i := range 40000 {
		pipe.Set(ctx, fmt.Sprintf("bp10-filler-%d", i), "x", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// DEBUG RELOAD outlasts a client's 3s read timeout, and go-redis sends
	// a timed-out command again: a second DEBUG RELOAD that arrives while
	// the first loads saves the part loaded so far and loads that, losing
	// the rest, the holder's key among them ("releasing k: lock not held").
	// So the reload's client waits for its answer and never retries.
	opt := *admin.Options()
	opt.ReadTimeout, opt.MaxRetries = -1, -1
	reloader := redis.NewClient(&opt)
	t.Cleanup(func() { reloader.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := reloader.Do(context.Background(), "DEBUG", "RELOAD").Err(); err != nil {
			t.Logf("DEBUG RELOAD: %v", err)
		}
	}()
	probe := redistest.ClientOf(t, srv)
	pgtest.Eventually(t, "the server answers LOADING", func() bool {
		err := probe.Ping(ctx).Err()
		return err != nil && strings.HasPrefix(err.Error(), "LOADING")
	})
	t.Cleanup(func() { <-done })
	return done
}

// TestAttackLoadingOutlastsTheCleanup: TestBusyOutlastsTheCleanup with
// LOADING (a dataset being loaded) in place of BUSY: the cancelled
// waiter's take-back, answered LOADING past the clean-up bound, goes on in
// the background and takes the registration back once the load is over,
// so the holder's release hands the key to nobody.
func TestAttackLoadingOutlastsTheCleanup(t *testing.T) {
	defer func(d time.Duration) { waiterTTL = d }(waiterTTL)
	waiterTTL = 90 * time.Second
	srv, err := redisserver.Start(context.Background(), redisserver.Options{Args: []string{"--enable-debug-command", "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx := context.Background()
	holder := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "holder", TTL: 5 * time.Minute})
	waiter := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "waiter", Wait: time.Minute})
	other := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "other"})
	h, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(wctx, "k")
		if err == nil {
			_ = l.Release(ctx)
		}
		done <- err
	}()
	waitForWaiters(t, holder, "k", 1)
	loaded := makeLoading(t, srv)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the waiter got the key while it was held")
		}
		t.Logf("the waiter returned after %v: %v", time.Since(start), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled waiter's Acquire did not return 30s later under LOADING")
	}
	<-loaded
	t.Logf("the reload took %v", time.Since(start))
	pgtest.Eventually(t, "the cancelled waiter's registration is taken back", func() bool {
		return len(waiters(t, holder, "k")) == 0
	})
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := other.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("TryAcquire after the holder's release: %v", err)
	}
	_ = l.Release(ctx)
}
