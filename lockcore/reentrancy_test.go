package lockcore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

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
// still works: the cluster is then named by its start time and port.
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
