package lockcore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Seed 001 unit test 2: timeout. Also: the connection of a timed-out acquire
// is destroyed, not returned; nothing stays held or queued.
func TestTimeoutDestroysConnection(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()
	holdElsewhere(t, key)

	called := false
	err := s.With(context.Background(), key, func(context.Context) error {
		called = true
		return nil
	}, lockcore.Wait(300*time.Millisecond))
	if !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	var lerr *lockcore.AdvisoryLockError
	if !errors.As(err, &lerr) || lerr.Key != key || lerr.Op != "acquire" {
		t.Fatalf("err = %#v, want *AdvisoryLockError for %v", err, key)
	}
	if called {
		t.Error("body ran without the lock")
	}
	ev, ok := rec.last(lockcore.EventTimeout)
	if !ok || ev.PID == 0 {
		t.Fatalf("no timeout event with a pid: %+v", ev)
	}
	pgtest.Eventually(t, "the timed-out lock connection is closed", func() bool { return !backendAlive(t, mon, ev.PID) })
	if _, waiting := countGranted(rowsFor(t, mon, key)); waiting != 0 {
		t.Errorf("%d waiters left queued after the timeout", waiting)
	}
	if s.Phantoms() != 0 {
		t.Errorf("phantoms = %d after a plain timeout, want 0", s.Phantoms())
	}
}

// Cancelling the context stops a wait promptly and leaves nothing held: by
// the time With returns, the server has ended the wait (no queued row), and
// once the holder lets go nobody gets the key.
func TestCancelStopsWaitOnServer(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()
	release := holdElsewhere(t, key)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.With(ctx, key, func(context.Context) error {
			t.Error("body ran after cancel")
			return nil
		}, lockcore.Wait(time.Hour))
	}()
	pgtest.Eventually(t, "the acquire waits on the server", func() bool {
		_, w := countGranted(rowsFor(t, mon, key))
		return w == 1
	})
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second): // a deadlock guard, not a speed check
		t.Fatal("With still waiting 30s after its context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, w := countGranted(rowsFor(t, mon, key)); w != 0 {
		t.Errorf("the server still queues the cancelled wait (%d waiters)", w)
	}
	release()
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("after cancel and release the key is held: %+v", rows)
	}
	if rec.count(lockcore.EventCanceled) != 1 {
		t.Errorf("canceled events = %d, want 1", rec.count(lockcore.EventCanceled))
	}
	if s.Held() != 0 {
		t.Errorf("Held() = %d", s.Held())
	}
}

// A context cancelled before the call never takes the lock.
func TestCancelledBeforeCall(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.With(ctx, key, func(context.Context) error {
		t.Error("body ran")
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("key held: %+v", rows)
	}
}

// A lock connection's session carries lock_timeout just under the
// Service's timeout; a shorter per-call timeout is local to its statement
// and leaves the session value alone; a Service with another timeout on the
// same connection sets its own.
func TestSessionLockTimeout(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	show := func() string {
		var lt string
		if err := pool.QueryRow(context.Background(), "SHOW lock_timeout").Scan(&lt); err != nil {
			t.Fatal(err)
		}
		return lt
	}
	s := lockcore.New(pool)
	if err := s.With(context.Background(), freshAgent(), noop, lockcore.Wait(1234*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if lt := show(); lt != "14950ms" {
		t.Errorf("session lock_timeout after a 1234ms acquire = %q, want 14950ms (15s less the margin)", lt)
	}
	// 2s, not less: after its timeout (which destroys the connection) the
	// short Service's next acquire must connect and take a free key within
	// it, on a loaded box too. Still under 5s, so its margin is the 1%.
	short := lockcore.New(pool, lockcore.Wait(2*time.Second))
	key := freshAgent()
	holdElsewhere(t, key)
	if err := short.With(context.Background(), key, noop); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("short service: %v, want ErrTimeout", err)
	}
	if err := short.With(context.Background(), freshAgent(), noop); err != nil {
		t.Fatal(err)
	}
	if lt := show(); lt != "1980ms" {
		t.Errorf("session lock_timeout after the 2s service = %q, want 1980ms", lt)
	}
}

// A context deadline sooner than the timeout bounds the wait and ends as
// ErrTimeout (also wrapping context.DeadlineExceeded when the context, not
// the server's lock_timeout, fired first).
func TestContextDeadlineIsTimeout(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 2)
	mon := pgtest.Conn(t)
	key := freshAgent()
	holdElsewhere(t, key)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := s.With(ctx, key, noop) // the Service's timeout is 15s
	if !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if rec.count(lockcore.EventTimeout) != 1 {
		t.Errorf("timeout events = %d, want 1", rec.count(lockcore.EventTimeout))
	}
	if _, w := countGranted(rowsFor(t, mon, key)); w != 0 {
		t.Errorf("%d waiters still queued", w)
	}
}

// A server that stops answering mid-wait ends in ErrTimeout shortly after
// the timeout (the socket deadline), never a hang, and the connection is
// not returned to the pool.
func TestServerStopsAnswering(t *testing.T) {
	t.Parallel()
	p := pgtest.NewProxy(t, pgtest.DSN(t))
	cfg, err := pgxpool.ParseConfig(p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defer p.Thaw() // before pool.Close, which waits for a connection stuck behind the frozen proxy
	s := lockcore.New(pool, lockcore.Wait(300*time.Millisecond))
	// Prepares the connection; its own wait, as a loaded box may take longer than 300ms to connect.
	if err := s.With(context.Background(), freshAgent(), noop, lockcore.Wait(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	key := freshAgent()
	holdElsewhere(t, key) // so the server would wait, were it answering
	p.Freeze()
	done := make(chan error, 1)
	go func() { done <- s.With(context.Background(), key, noop) }()
	select {
	case err := <-done:
		if !errors.Is(err, lockcore.ErrTimeout) {
			t.Errorf("err = %v, want ErrTimeout", err)
		}
	case <-time.After(30 * time.Second): // a deadlock guard, not a speed check
		t.Fatal("With still waiting 30s after a 300ms timeout on a server that stopped answering")
	}
	p.Thaw()
	pgtest.Eventually(t, "the dead connection leaves the pool", func() bool { return pool.Stat().AcquiredConns() == 0 })
}

// A per-call timeout longer than the Service's default is honoured: the
// lock statement carries its own lock_timeout, and the wait outlasts the
// default.
func TestTimeoutLongerThanDefault(t *testing.T) {
	t.Parallel()
	var sent []string
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.MaxConns = 2
		c.ConnConfig.Tracer = &sqlTracer{fn: func(sql string, args []any) {
			if strings.Contains(sql, "pg_advisory_lock") {
				sent = append(sent, fmt.Sprint(sql, args))
			}
		}}
	})
	s := lockcore.New(pool, lockcore.Wait(300*time.Millisecond))
	mon := pgtest.Conn(t)
	key := freshAgent()
	release := holdElsewhere(t, key)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.With(context.Background(), key, noop, lockcore.Wait(time.Minute)) }()
	// Still queued well past the 300ms default (this asserts that the wait
	// was not cut short, not how fast anything is).
	for time.Since(start) < 1500*time.Millisecond {
		select {
		case err := <-done:
			t.Fatalf("WithTimeout(1m) returned %v after %v, before the holder let go", err, time.Since(start))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, w := countGranted(rowsFor(t, mon, key)); w != 1 {
		t.Fatalf("%d waiters queued, want 1", w)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("WithTimeout(1m) after the release: %v", err)
	}
	if len(sent) != 1 || !strings.Contains(sent[0], "set_config('lock_timeout'") || !strings.Contains(sent[0], " 59") {
		t.Errorf("lock statement sent: %q, want lock_timeout just under 60000ms in it", sent)
	}
}

// A shared-pool Service on a connection a dedicated Service prepared takes
// the session settings back off it: lock_timeout, and the synchronous
// commit a fencing Service sets for its fences. A fencing Service sets that
// on a connection a Service without fencing prepared.
func TestSharedServiceResetsSessionTimeout(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	ctx := context.Background()
	durable := func(step string, want bool) {
		t.Helper()
		var on bool // set on, rather than the session's default
		if err := pool.QueryRow(ctx, "SELECT setting = 'on' AND setting <> reset_val FROM pg_settings WHERE name = 'synchronous_commit'").Scan(&on); err != nil || on != want {
			t.Errorf("%s: synchronous_commit set on = %v (%v), want %v", step, on, err, want)
		}
	}
	if err := lockcore.New(pool, lockcore.NoFencing()).With(ctx, freshAgent(), noop); err != nil {
		t.Fatal(err)
	}
	durable("after a Service without fencing", false)
	if err := lockcore.New(pool).With(ctx, freshAgent(), noop); err != nil {
		t.Fatal(err)
	}
	durable("after a fencing Service", true)
	if err := lockcore.New(pool, lockcore.SharedPool()).With(ctx, freshAgent(), noop); err != nil {
		t.Fatal(err)
	}
	durable("after the shared Service", false)
	var lt string
	if err := pool.QueryRow(ctx, "SHOW lock_timeout").Scan(&lt); err != nil || lt != "0" {
		t.Errorf("lock_timeout = %q (%v), want 0 after the shared Service", lt, err)
	}
}

// A zero timeout means the Service's timeout everywhere: WithTimeout(ctx,
// k, 0, fn) is Acquire(ctx, k, 0), not an acquire that has already run
// out of time.
func TestZeroTimeoutIsDefault(t *testing.T) {
	t.Parallel()
	// The default wait outlasts a connect on a loaded box (a free key must
	// be taken) and stays short (a held key must time out at it).
	s, _ := newService(t, 2, lockcore.Wait(2*time.Second))
	ctx := context.Background()
	for _, d := range []time.Duration{0, -time.Second} {
		ran := false
		if err := s.With(ctx, freshAgent(), func(context.Context) error { ran = true; return nil }, lockcore.Wait(d)); err != nil || !ran {
			t.Errorf("WithTimeout(%v) on a free key = %v (ran %v)", d, err, ran)
		}
		key := freshAgent()
		release := holdElsewhere(t, key)
		err := s.With(ctx, key, noop, lockcore.Wait(d))
		if !errors.Is(err, lockcore.ErrTimeout) || strings.Contains(err.Error(), "connection") {
			t.Errorf("WithTimeout(%v) on a held key = %v, want the lock's ErrTimeout", d, err)
		}
		release()
	}
}
