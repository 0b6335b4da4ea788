package lockcore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// Seed 001 unit test 1: acquisition and release.
func TestWithHoldsDuringBodyAndReleasesAfter(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()
	ran := false
	err := s.With(context.Background(), key, func(ctx context.Context) error {
		ran = true
		rows := rowsFor(t, mon, key)
		if len(rows) != 1 || !rows[0].granted {
			t.Errorf("inside the body pg_locks shows %+v, want one granted row", rows)
		} else if want := model.AppWithOwner(lockcore.DefaultApplicationName, lockcore.Owner()); rows[0].app != want {
			t.Errorf("lock connection application_name = %q, want %q", rows[0].app, want)
		}
		if s.Held() != 1 {
			t.Errorf("Held() = %d inside the body, want 1", s.Held())
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("With: err=%v ran=%v", err, ran)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("after With pg_locks still shows %+v", rows)
	}
	if s.Held() != 0 {
		t.Errorf("Held() = %d after With, want 0", s.Held())
	}
	for _, k := range []lockcore.EventKind{lockcore.EventAttempt, lockcore.EventAcquired, lockcore.EventReleased} {
		if rec.count(k) != 1 {
			t.Errorf("%v events = %d, want 1", k, rec.count(k))
		}
	}
}

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

// Seed 001 unit test 3: non-blocking skip, and acquired.
func TestTryWith(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 4)
	key := freshAgent()
	release := holdElsewhere(t, key)

	acquired, err := s.TryWith(context.Background(), key, func(context.Context) error {
		t.Error("body ran although the key is held elsewhere")
		return nil
	})
	if acquired || err != nil {
		t.Fatalf("held elsewhere: acquired=%v err=%v, want false, nil", acquired, err)
	}
	if rec.count(lockcore.EventSkipped) != 1 {
		t.Errorf("skipped events = %d, want 1", rec.count(lockcore.EventSkipped))
	}

	release()
	mon := pgtest.Conn(t)
	acquired, err = s.TryWith(context.Background(), key, func(context.Context) error {
		if g, _ := countGranted(rowsFor(t, mon, key)); g != 1 {
			t.Errorf("inside TryWith %d granted rows, want 1", g)
		}
		return nil
	})
	if !acquired || err != nil {
		t.Fatalf("free key: acquired=%v err=%v, want true, nil", acquired, err)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("after TryWith pg_locks still shows %+v", rows)
	}
}

// Seed 001 unit test 4: cleanup on error and on panic.
func TestBodyErrorReleases(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()
	boom := errors.New("boom")
	err := s.With(context.Background(), key, func(context.Context) error { return boom })
	if err != boom {
		t.Fatalf("With returned %v, want the body's error itself", err)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("lock still held after a body error: %+v", rows)
	}
	if st := s.Pool().Stat(); st.AcquiredConns() != 0 {
		t.Errorf("%d connections still checked out", st.AcquiredConns())
	}
}

func TestBodyPanicReleasesAndRepanics(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()
	func() {
		defer func() {
			if r := recover(); r != "kaboom" {
				t.Errorf("recovered %v, want the body's panic value", r)
			}
		}()
		_ = s.With(context.Background(), key, func(context.Context) error { panic("kaboom") })
		t.Error("With returned instead of panicking")
	}()
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("lock still held after a panic: %+v", rows)
	}
	if s.Held() != 0 {
		t.Errorf("Held() = %d after a panic", s.Held())
	}
}

// Seed 001 unit test 6 and concurrency test 6: reentrancy is refused at once,
// without deadlock, and the outer lock stays held.
func TestReentrantWithRefused(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()
	err := s.With(context.Background(), key, func(ctx context.Context) error {
		inner := s.With(ctx, key, func(context.Context) error {
			t.Error("inner body ran")
			return nil
		}, lockcore.Wait(time.Hour))
		if !errors.Is(inner, lockcore.ErrReentrant) {
			t.Errorf("inner With = %v, want ErrReentrant", inner)
		}
		if g, _ := countGranted(rowsFor(t, mon, key)); g != 1 {
			t.Errorf("outer lock not held after the refusal (%d granted)", g)
		}
		// A different key nests fine.
		return s.With(ctx, freshAgent(), func(context.Context) error { return nil })
	})
	if err != nil {
		t.Fatalf("outer With: %v", err)
	}
	if rec.count(lockcore.EventReentrant) != 1 {
		t.Errorf("reentrant events = %d, want 1", rec.count(lockcore.EventReentrant))
	}
}

// Seed 001 concurrency test 10: TryWith inside the same key yields false.
func TestReentrantTryWithNotAcquired(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	key := freshAgent()
	err := s.With(context.Background(), key, func(ctx context.Context) error {
		acquired, err := s.TryWith(ctx, key, func(context.Context) error {
			t.Error("inner body ran")
			return nil
		})
		if acquired || err != nil {
			t.Errorf("reentrant TryWith = %v, %v; want false, nil", acquired, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The lock survives commits made on other connections (the reason for
// session locks on a dedicated connection); seed 001 concurrency test 8: an
// error after intermediate commits still releases, and the commits stay.
func TestLockSurvivesCommitsAndErrorAfterCommitsReleases(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	work := pgtest.Pool(t, nil)
	mon := pgtest.Conn(t)
	ctx := context.Background()
	table := "survive_" + time.Now().Format("150405000000")
	if _, err := work.Exec(ctx, "CREATE TABLE "+table+" (n int)"); err != nil {
		t.Fatal(err)
	}
	key := freshAgent()
	boom := errors.New("after three commits")
	err := s.With(ctx, key, func(ctx context.Context) error {
		for i := range 3 {
			tx, err := work.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", i); err != nil {
				return err
			}
			if err := tx.Commit(ctx); err != nil {
				return err
			}
			if g, _ := countGranted(rowsFor(t, mon, key)); g != 1 {
				t.Errorf("lock gone after commit %d", i+1)
			}
		}
		return boom
	})
	if err != boom {
		t.Fatalf("With = %v, want the body's error", err)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("lock still held: %+v", rows)
	}
	var n int
	if err := work.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 3 {
		t.Errorf("committed rows = %d (%v), want 3", n, err)
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

// The body's context carries the key and ends when the body returns.
func TestBodyContext(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 2)
	mon := pgtest.Conn(t)
	key := freshAgent()
	var inner context.Context
	err := s.With(context.Background(), key, func(ctx context.Context) error {
		inner = ctx
		if !lockcore.Holds(ctx, key) {
			t.Error("body context does not carry the key")
		}
		if pid, ok := lockcore.HolderPID(ctx, key); !ok || pid == 0 {
			t.Errorf("HolderPID = %d, %v", pid, ok)
		} else if rows := rowsFor(t, mon, key); len(rows) != 1 || uint32(rows[0].pid) != pid {
			t.Errorf("HolderPID %d, pg_locks %+v", pid, rows)
		}
		if ctx.Err() != nil {
			t.Errorf("body context already done: %v", ctx.Err())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if inner.Err() == nil {
		t.Error("body context still live after With returned")
	}
	if lockcore.Holds(context.Background(), key) {
		t.Error("a fresh context holds the key")
	}
}

// Acquire and Release for holds that span several steps.
func TestAcquireRelease(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	mon := pgtest.Conn(t)
	key := lockcore.HashKey("tenant-7:2026-11-21")
	l, err := s.Acquire(context.Background(), key)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if l.Key() != key || l.PID() == 0 {
		t.Errorf("Lock key=%v pid=%d", l.Key(), l.PID())
	}
	rows := rowsFor(t, mon, key)
	if len(rows) != 1 || uint32(rows[0].pid) != l.PID() {
		t.Errorf("pg_locks %+v, want one row of pid %d", rows, l.PID())
	}
	if _, err := s.Acquire(l.Context(), key, lockcore.Wait(time.Hour)); !errors.Is(err, lockcore.ErrReentrant) {
		t.Errorf("Acquire inside the lock's context = %v, want ErrReentrant", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if l.Context().Err() == nil {
		t.Error("lock context live after Release")
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("held after Release: %+v", rows)
	}
}

// Release with a cancelled context still frees the lock.
func TestReleaseWithCancelledContext(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 2)
	mon := pgtest.Conn(t)
	key := freshAgent()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("held after Release: %+v", rows)
	}
}

// A terminated holder backend: the lock frees on the server, and Release
// reports ErrLost.
func TestLostLock(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 2)
	mon := pgtest.Conn(t)
	key := freshAgent()
	err := s.With(context.Background(), key, func(ctx context.Context) error {
		l := rowsFor(t, mon, key)
		if len(l) != 1 {
			t.Fatalf("rows %+v", l)
		}
		// Not the body's ctx: the loss it causes cancels that, maybe
		// before this Exec has read its reply.
		if _, err := mon.Exec(context.Background(), "SELECT pg_terminate_backend($1)", l[0].pid); err != nil {
			t.Fatal(err)
		}
		pgtest.Eventually(t, "the key is free", func() bool { return len(rowsFor(t, mon, key)) == 0 })
		return nil
	})
	if !errors.Is(err, lockcore.ErrLost) {
		t.Fatalf("With = %v, want ErrLost", err)
	}
	if rec.count(lockcore.EventLost) != 1 || s.Held() != 0 {
		t.Errorf("lost events = %d, held = %d", rec.count(lockcore.EventLost), s.Held())
	}
	if n := s.Pool().Stat().AcquiredConns(); n != 0 {
		t.Errorf("%d connections still checked out after the lost lock", n)
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

// WithSharedPool leaves the session's lock_timeout alone, and timeouts
// still end on the server.
func TestSharedPoolLeavesSession(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	// Its wait bounds the connects of the two acquires of free keys (the
	// timeout destroys the connection), so seconds.
	s := lockcore.New(pool, lockcore.SharedPool(), lockcore.Wait(2*time.Second))
	if err := s.With(context.Background(), freshAgent(), noop); err != nil {
		t.Fatal(err)
	}
	key := freshAgent()
	holdElsewhere(t, key)
	if err := s.With(context.Background(), key, noop); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if err := s.With(context.Background(), freshAgent(), noop); err != nil {
		t.Fatal(err)
	}
	var lt, app string
	if err := pool.QueryRow(context.Background(), "SELECT current_setting('lock_timeout'), current_setting('application_name')").Scan(&lt, &app); err != nil {
		t.Fatal(err)
	}
	if want := model.AppWithOwner(lockcore.DefaultApplicationName, lockcore.Owner()); lt != "0" || app != want {
		t.Errorf("shared pool session: lock_timeout=%q application_name=%q; want 0 and %q", lt, app, want)
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

// WithApplicationName("") leaves the pool's application_name alone.
func TestApplicationNameOption(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ConnConfig.RuntimeParams["application_name"] = "mine"
	})
	mon := pgtest.Conn(t)
	for _, tc := range []struct{ opt, want string }{{"", "mine"}, {"custom.lock", "custom.lock owner=me:1"}} {
		s := lockcore.New(pool, lockcore.ApplicationName(tc.opt), lockcore.OwnerID("me:1"))
		key := freshAgent()
		err := s.With(context.Background(), key, func(context.Context) error {
			if rows := rowsFor(t, mon, key); len(rows) != 1 || rows[0].app != tc.want {
				t.Errorf("WithApplicationName(%q): rows %+v, want app %q", tc.opt, rows, tc.want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("WithApplicationName(%q): %v", tc.opt, err)
		}
	}
}

// One-bigint keys (fixed and hashed, negative included) lock and unlock.
func TestInt64Keys(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 2)
	mon := pgtest.Conn(t)
	for _, key := range []lockcore.Key{lockcore.Int64(-1), lockcore.Int64(1 << 40), lockcore.HashKey("")} {
		err := s.With(context.Background(), key, func(ctx context.Context) error {
			if g, _ := countGranted(rowsFor(t, mon, key)); g != 1 {
				t.Errorf("%v: %d granted rows", key, g)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%v: %v", key, err)
		}
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

type sqlTracer struct{ fn func(sql string, args []any) }

func (tr *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.fn(d.SQL, d.Args)
	return ctx
}

func (tr *sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A context cancelled just as the grant comes back counts the acquire as
// failed: the unconditional unlock finds the lock held (a phantom, as in
// PostgreSQL bug #17686), counts it, and nothing stays held.
func TestPhantomThroughAcquire(t *testing.T) {
	t.Parallel()
	mon := pgtest.Conn(t)
	for _, try := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		pool := pgtest.Pool(t, func(c *pgxpool.Config) {
			c.MaxConns = 1
			c.ConnConfig.Tracer = &endTracer{fn: func(sql string) {
				if strings.Contains(sql, "advisory_lock(") && !strings.Contains(sql, "unlock") {
					cancel() // the grant is in; the caller gives up now
				}
			}}
		})
		s := lockcore.New(pool)
		key := freshAgent()
		var err error
		if try {
			_, err = s.TryWith(ctx, key, func(context.Context) error { t.Error("body ran"); return nil })
		} else {
			err = s.With(ctx, key, func(context.Context) error { t.Error("body ran"); return nil })
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("try=%v: err = %v, want context.Canceled", try, err)
		}
		if s.Phantoms() != 1 {
			t.Errorf("try=%v: phantoms = %d, want 1", try, s.Phantoms())
		}
		if rows := rowsFor(t, mon, key); len(rows) != 0 {
			t.Errorf("try=%v: key still held: %+v", try, rows)
		}
		pgtest.Eventually(t, "nothing checked out", func() bool { return pool.Stat().AcquiredConns() == 0 })
	}
}

// endTracer calls fn with the SQL of every statement that succeeded.
type endTracer struct{ fn func(sql string) }

type sqlKey struct{}

func (tr *endTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlKey{}, d.SQL)
}

func (tr *endTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if sql, _ := ctx.Value(sqlKey{}).(string); d.Err == nil {
		tr.fn(sql)
	}
}

// An observer that panics does not leave a lock held.
func TestPanickingObserver(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 2, lockcore.Observe(func(e lockcore.Event) {
		if e.Kind == lockcore.EventAcquired {
			panic("observer bug")
		}
	}), lockcore.Logger(slog.New(slog.DiscardHandler)))
	mon := pgtest.Conn(t)
	key := freshAgent()
	ran := false
	if err := s.With(context.Background(), key, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("With: %v (body ran: %v)", err, ran)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 || s.Held() != 0 {
		t.Errorf("held after With: %+v (Held %d)", rows, s.Held())
	}
}

// The same key in another database is another lock: nesting it is not
// reentrant.
func TestReentrancyIsPerDatabase(t *testing.T) {
	t.Parallel()
	here, _ := newService(t, 2)
	otherDSN, err := pgtest.WithDatabase(pgtest.AdminDSN(t), "postgres")
	if err != nil {
		t.Fatal(err)
	}
	otherPool, err := pgxpool.New(context.Background(), otherDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer otherPool.Close()
	other := lockcore.New(otherPool)
	key := freshAgent()
	err = here.With(context.Background(), key, func(ctx context.Context) error {
		return other.With(ctx, key, func(ctx context.Context) error {
			// ...but the same database still refuses.
			if err := here.With(ctx, key, noop); !errors.Is(err, lockcore.ErrReentrant) {
				t.Errorf("same database: %v, want ErrReentrant", err)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("the same key in another database: %v", err)
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

// Reentrancy knows a database by what the server says, not by how a DSN
// spells it: two pools on the same database whose host differs by a
// trailing slash are one database, so a nested acquire of a held key
// through the other pool is refused at once instead of waiting for itself.
func TestReentrancyIgnoresDSNSpelling(t *testing.T) {
	t.Parallel()
	here, _ := newService(t, 2, lockcore.Wait(3*time.Second))
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Host += "/" // the same socket directory, spelt differently
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	there := lockcore.New(pool, lockcore.Wait(3*time.Second))
	key := freshAgent()
	err = here.With(context.Background(), key, func(ctx context.Context) error {
		start := time.Now()
		err := there.With(ctx, key, noop)
		if !errors.Is(err, lockcore.ErrReentrant) {
			t.Errorf("the same database through another spelling: %v after %v, want ErrReentrant", err, time.Since(start).Round(time.Millisecond))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A role that may not read pg_control_system still locks, and reentrancy
// still works: the cluster is then named by the pool's host and port.
func TestReentrancyWithoutSystemIdentifier(t *testing.T) {
	t.Parallel()
	dsn := freshDatabase(t)
	ctx := context.Background()
	admin := newPool(t, dsn, nil)
	// Function privileges live in each database's pg_proc: this one only.
	if _, err := admin.Exec(ctx, "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("lockcore_nosysid_%d", time.Now().UnixNano()%1e9)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw'", role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(cctx, "DROP ROLE "+role)
	})
	roleDSN, err := pgtest.WithUser(dsn, role, "pw")
	if err != nil {
		t.Fatal(err)
	}
	here := lockcore.New(newPool(t, roleDSN, nil), lockcore.NoFencing(), lockcore.Wait(3*time.Second))
	there := lockcore.New(newPool(t, roleDSN, nil), lockcore.NoFencing(), lockcore.Wait(3*time.Second))
	key := freshAgent()
	err = here.With(ctx, key, func(ctx context.Context) error {
		if err := there.With(ctx, key, noop); !errors.Is(err, lockcore.ErrReentrant) {
			t.Errorf("nested acquire through a second pool: %v, want ErrReentrant", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
