package lockcore_test

import (
	"context"
	"errors"
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
