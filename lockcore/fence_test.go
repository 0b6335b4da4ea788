package lockcore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Every grant of a key gets a fence greater than every earlier grant's:
// across blocking and try acquires, across two Services on their own
// pools, and across a loss and the grant that follows. The body's context
// carries the fence.
func TestFenceIncreases(t *testing.T) {
	t.Parallel()
	a, _ := newService(t, 2)
	b, _ := newService(t, 2)
	mon := pgtest.Conn(t)
	ctx := context.Background()
	key := freshAgent()
	var last int64
	next := func(what string, f int64) {
		t.Helper()
		if f <= last {
			t.Fatalf("%s: fence %d, not above the previous %d", what, f, last)
		}
		last = f
	}
	for i := range 3 {
		for name, s := range map[string]*lockcore.Service{"a": a, "b": b} {
			l, err := s.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			next(fmt.Sprintf("%s acquire %d", name, i), l.Fence())
			if f, ok := lockcore.FenceOf(l.Context(), key); !ok || f != l.Fence() {
				t.Errorf("FenceOf(Lock.Context) = %d, %v; want %d", f, ok, l.Fence())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l, err = s.TryAcquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			next(fmt.Sprintf("%s try %d", name, i), l.Fence())
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A holder loses the key; the next grant, to another Service, fences
	// higher, so storage that saw it refuses the stale holder.
	stale, err := a.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	next("before the loss", stale.Fence())
	terminate(t, mon, stale.PID())
	waitDone(t, stale, "terminated holder")
	err = b.With(ctx, key, func(ctx context.Context) error {
		f, ok := lockcore.FenceOf(ctx, key)
		if !ok {
			t.Error("body context carries no fence")
		}
		next("after the loss", f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := lockcore.FenceOf(context.Background(), key); ok || f != 0 {
		t.Errorf("FenceOf a context that holds nothing = %d, %v", f, ok)
	}
}

// With fencing off a Service sends the bare lock statements, fences 0, and
// creates nothing in the database.
func TestFencingOff(t *testing.T) {
	t.Parallel()
	dsn := freshDatabase(t)
	var sent []string
	pool := newPool(t, dsn, func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = &sqlTracer{fn: func(sql string, _ []any) { sent = append(sent, sql) }}
	})
	s := lockcore.New(pool, lockcore.NoFencing())
	if s.Fencing() {
		t.Error("Fencing() with NoFencing")
	}
	ctx := context.Background()
	key := freshAgent()
	l, err := s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() != 0 {
		t.Errorf("Fence() = %d with fencing off", l.Fence())
	}
	if f, ok := lockcore.FenceOf(l.Context(), key); !ok || f != 0 {
		t.Errorf("FenceOf = %d, %v; want 0, true", f, ok)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.TryWith(ctx, key, noop); !ok || err != nil {
		t.Fatalf("TryWith = %v, %v", ok, err)
	}
	for _, q := range sent {
		if strings.Contains(q, "nextval") || strings.Contains(q, "CREATE") || strings.Contains(q, "to_regclass") {
			t.Errorf("sent %q with fencing off", q)
		}
	}
	var schema *string
	if err := pool.QueryRow(ctx, "SELECT to_regnamespace($1)::text", lockcore.DefaultFenceSchema).Scan(&schema); err != nil || schema != nil {
		t.Errorf("schema %s exists (%v) after a Service without fencing", lockcore.DefaultFenceSchema, err)
	}
}

// A role that may not create the sequence gets one clear error naming
// NoFencing, and nothing stays held; with NoFencing the same role locks.
func TestFencingNeedsPrivileges(t *testing.T) {
	t.Parallel()
	dsn := freshDatabase(t)
	role := fmt.Sprintf("lockcore_plain_%d", time.Now().UnixNano()%1e9)
	admin := newPool(t, dsn, nil)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'pw'", role)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(cctx, "DROP OWNED BY "+role)
		_, _ = admin.Exec(cctx, "DROP ROLE "+role)
	})
	roleDSN, err := pgtest.WithUser(dsn, role, "pw")
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, roleDSN, nil)
	rec := &recorder{}
	s := lockcore.New(pool, lockcore.Observe(rec.observe))
	key := freshAgent()
	err = s.With(ctx, key, func(context.Context) error {
		t.Error("body ran without its fence")
		return nil
	})
	if !errors.Is(err, lockcore.ErrFencing) || !strings.Contains(err.Error(), "NoFencing") {
		t.Fatalf("err = %v, want ErrFencing naming NoFencing", err)
	}
	t.Log(err)

	// The sequence exists but the role may not use it: nextval fails after
	// the grant, and the lock is undone without counting a phantom.
	if err := lockcore.New(admin).With(ctx, freshAgent(), noop); err != nil {
		t.Fatalf("owner creating the sequence: %v", err)
	}
	if _, err := admin.Exec(ctx, "GRANT USAGE ON SCHEMA "+lockcore.DefaultFenceSchema+" TO "+role); err != nil {
		t.Fatal(err)
	}
	s = lockcore.New(pool, lockcore.Observe(rec.observe))
	_, err = s.Acquire(ctx, key)
	if !errors.Is(err, lockcore.ErrFencing) || !strings.Contains(err.Error(), "NoFencing") {
		t.Fatalf("err = %v, want ErrFencing naming NoFencing", err)
	}
	t.Log(err)
	if s.Phantoms() != 0 || rec.count(lockcore.EventPhantom) != 0 {
		t.Errorf("a failed nextval counted as a phantom lock")
	}
	other := newPool(t, dsn, nil)
	var free bool
	if err := other.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::int4, $2::int4)", key.Space(), key.ID()).Scan(&free); err != nil || !free {
		t.Fatalf("key held after the failed acquire: %v %v", free, err)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}

	if err := lockcore.New(pool, lockcore.NoFencing()).With(ctx, key, noop); err != nil {
		t.Errorf("NoFencing for the same role: %v", err)
	}
}

// TryAcquire never returns a nil Lock with a nil error.
func TestTryAcquireErrors(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 2)
	key := freshAgent()
	holdElsewhere(t, key)
	l, err := s.TryAcquire(context.Background(), key)
	var lerr *lockcore.AdvisoryLockError
	if l != nil || !errors.Is(err, lockcore.ErrLocked) || !errors.As(err, &lerr) || lerr.Op != lockcore.OpTry {
		t.Fatalf("TryAcquire of a key held elsewhere = %v, %v; want nil and ErrLocked", l, err)
	}
	if lockcore.Classify(err) != lockcore.EventSkipped || rec.count(lockcore.EventSkipped) != 1 {
		t.Errorf("Classify = %v, skipped events %d", lockcore.Classify(err), rec.count(lockcore.EventSkipped))
	}
	other := freshAgent()
	err = s.With(context.Background(), other, func(ctx context.Context) error {
		l, err := s.TryAcquire(ctx, other)
		if l != nil || !errors.Is(err, lockcore.ErrReentrant) {
			t.Errorf("reentrant TryAcquire = %v, %v; want nil and ErrReentrant", l, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want lockcore.EventKind
	}{
		{nil, lockcore.EventAcquired},
		{&lockcore.AdvisoryLockError{Err: lockcore.ErrTimeout}, lockcore.EventTimeout},
		{fmt.Errorf("%w: %w", lockcore.ErrTimeout, context.DeadlineExceeded), lockcore.EventTimeout},
		{&lockcore.AdvisoryLockError{Err: lockcore.ErrReentrant}, lockcore.EventReentrant},
		{&lockcore.AdvisoryLockError{Err: lockcore.ErrLocked}, lockcore.EventSkipped},
		{errors.Join(context.Canceled, &lockcore.AdvisoryLockError{Err: lockcore.ErrLost}), lockcore.EventLost},
		{context.Canceled, lockcore.EventCanceled},
		{lockcore.ErrFencing, lockcore.EventFailed},
		{errors.New("boom"), lockcore.EventFailed},
	} {
		if got := lockcore.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// freshDatabase creates a database of the test's own (dropped at the end)
// and returns its DSN: for tests that check what a Service creates.
func freshDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.AdminDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("lockcore_%s_%d", strings.ToLower(t.Name()), time.Now().UnixNano()%1e9)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(cctx, pgtest.AdminDSN(t)); err == nil {
			_, _ = c.Exec(cctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			c.Close(cctx)
		}
	})
	dsn, err := pgtest.WithDatabase(pgtest.AdminDSN(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// newPool opens a pool on dsn, closed when the test ends.
func newPool(t *testing.T, dsn string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	if configure != nil {
		configure(cfg)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A fencing sequence that exists already is checked before its first
// fence: one whose settings cannot give increasing fences (a cache, a
// cycle, a negative increment, unlogged, or not a sequence at all) is
// refused with ErrFencing naming the fix, and the body never runs. One
// with the right settings is used as it is.
func TestFenceSequenceSettingsChecked(t *testing.T) {
	t.Parallel()
	dsn := freshDatabase(t)
	admin := newPool(t, dsn, nil)
	ctx := context.Background()
	for i, tc := range []struct {
		create string // %s is the sequence's name
		want   string // in the error; "" means accepted
	}{
		{"CREATE SEQUENCE %s CACHE 10", "CACHE 1"},
		{"CREATE SEQUENCE %s CYCLE", "NO CYCLE"},
		{"CREATE SEQUENCE %s INCREMENT BY -1", "INCREMENT BY 1"},
		{"CREATE UNLOGGED SEQUENCE %s", "SET LOGGED"},
		{"CREATE TABLE %s (x int)", "not a sequence"},
		{"CREATE SEQUENCE %s INCREMENT BY 5 NO CYCLE CACHE 1", ""},
	} {
		name := fmt.Sprintf("seq%d", i)
		if _, err := admin.Exec(ctx, fmt.Sprintf(tc.create, "public."+name)); err != nil {
			t.Fatal(err)
		}
		s := lockcore.New(admin, lockcore.FenceSequence("public", name))
		ran := false
		err := s.With(ctx, freshAgent(), func(context.Context) error { ran = true; return nil })
		if tc.want == "" {
			if err != nil || !ran {
				t.Errorf("%s: With = %v (ran %v), want the body run", fmt.Sprintf(tc.create, name), err, ran)
			}
			continue
		}
		if !errors.Is(err, lockcore.ErrFencing) || !strings.Contains(err.Error(), tc.want) || ran {
			t.Errorf("%s: With = %v (ran %v), want ErrFencing naming %q", fmt.Sprintf(tc.create, name), err, ran, tc.want)
		}
		t.Log(err)
	}
}

// FenceOf and HolderPID know their database: with the same key held in two
// databases, nested, each Service reports its own database's fence and
// holder, and the package-level FenceOf and HolderPID, which cannot tell
// which is meant, report nothing rather than the wrong one.
func TestFenceOfIsPerDatabase(t *testing.T) {
	t.Parallel()
	a := lockcore.New(newPool(t, freshDatabase(t), nil))
	b := lockcore.New(newPool(t, freshDatabase(t), nil))
	ctx := context.Background()
	key := freshAgent()
	for range 3 { // a's sequence moves ahead of b's
		if err := a.With(ctx, key, noop); err != nil {
			t.Fatal(err)
		}
	}
	outer, err := a.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer outer.Release(ctx)
	if f, ok := a.FenceOf(outer.Context(), key); !ok || f != outer.Fence() {
		t.Errorf("a.FenceOf = %d, %v; want %d", f, ok, outer.Fence())
	}
	if f, ok := b.FenceOf(outer.Context(), key); ok {
		t.Errorf("b.FenceOf with the key held only in a's database = %d, true", f)
	}
	err = b.With(outer.Context(), key, func(ctx context.Context) error {
		bf, _ := b.FenceOf(ctx, key) // the inner lock's
		if f, ok := a.FenceOf(ctx, key); !ok || f != outer.Fence() {
			t.Errorf("a.FenceOf inside b's body = %d, %v; want the outer lock's %d (b's is %d)", f, ok, outer.Fence(), bf)
		}
		if bf == outer.Fence() {
			t.Fatalf("the two databases' fences coincide (%d): the test cannot tell them apart", bf)
		}
		if pid, ok := a.HolderPID(ctx, key); !ok || pid != outer.PID() {
			t.Errorf("a.HolderPID inside b's body = %d, %v; want %d", pid, ok, outer.PID())
		}
		if pid, ok := b.HolderPID(ctx, key); !ok || pid == outer.PID() {
			t.Errorf("b.HolderPID inside b's body = %d, %v; want b's own holder, not %d", pid, ok, outer.PID())
		}
		if f, ok := lockcore.FenceOf(ctx, key); ok {
			t.Errorf("lockcore.FenceOf with the key held in two databases = %d, true; want false", f)
		}
		if pid, ok := lockcore.HolderPID(ctx, key); ok {
			t.Errorf("lockcore.HolderPID with the key held in two databases = %d, true; want false", pid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
