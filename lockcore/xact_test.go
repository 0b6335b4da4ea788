package lockcore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

func TestXactLockLastsUntilCommit(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, nil)
	mon := pgtest.Conn(t)
	key := lockcore.HashKey("tenant-1:2026-11-21")
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := lockcore.XactLock(ctx, tx, key); err != nil {
			return err
		}
		if g, _ := countGranted(rowsFor(t, mon, key)); g != 1 {
			t.Errorf("transaction lock not visible (%d granted)", g)
		}
		// Another transaction cannot take it meanwhile.
		return pgx.BeginFunc(ctx, pool, func(tx2 pgx.Tx) error {
			ok, err := lockcore.TryXactLock(ctx, tx2, key)
			if ok || err != nil {
				t.Errorf("TryXactLock in a second transaction = %v, %v; want false, nil", ok, err)
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows := rowsFor(t, mon, key); len(rows) != 0 {
		t.Errorf("transaction lock outlived its commit: %+v", rows)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		ok, err := lockcore.TryXactLock(ctx, tx, lockcore.Pair(3, 4))
		if !ok || err != nil {
			t.Errorf("TryXactLock on a free key = %v, %v", ok, err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A transaction's lock_timeout that fires is ErrTimeout.
func TestXactLockTimeout(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, nil)
	key := lockcore.HashKey("tenant-9:2026-11-21")
	holdElsewhere(t, key)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '100ms'"); err != nil {
			return err
		}
		return lockcore.XactLock(ctx, tx, key)
	})
	if !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}

// XactLock on a key held in its context, in the transaction's database,
// is refused with ErrReentrant at once: waiting would queue behind the
// caller's own session lock, for good with no lock_timeout and no
// deadline. The same key in another database is another lock.
func TestXactLockReentrant(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 2)
	work := pgtest.Pool(t, nil)
	other := newPool(t, freshDatabase(t), nil)
	key := freshAgent()
	err := s.With(context.Background(), key, func(ctx context.Context) error {
		// A guard against the hang the refusal prevents, not a speed check.
		gctx, cancel := context.WithTimeout(ctx, guard)
		defer cancel()
		err := pgx.BeginFunc(gctx, work, func(tx pgx.Tx) error { return lockcore.XactLock(gctx, tx, key) })
		var lerr *lockcore.AdvisoryLockError
		if !errors.Is(err, lockcore.ErrReentrant) || !errors.As(err, &lerr) || lerr.Op != lockcore.OpXact {
			t.Errorf("XactLock on a key the context holds = %v, want ErrReentrant", err)
		}
		err = pgx.BeginFunc(gctx, work, func(tx pgx.Tx) error {
			ok, err := lockcore.TryXactLock(gctx, tx, key)
			if ok {
				t.Error("TryXactLock on a key the context holds reported true")
			}
			return err
		})
		if err != nil {
			t.Errorf("TryXactLock on a key the context holds: %v", err)
		}
		err = pgx.BeginFunc(gctx, other, func(tx pgx.Tx) error { return lockcore.XactLock(gctx, tx, key) })
		if err != nil {
			t.Errorf("XactLock on the same key in another database: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := rec.count(lockcore.EventReentrant); n != 0 {
		t.Errorf("%d reentrant events from the Service, want 0 (XactLock has no observers)", n)
	}
}
