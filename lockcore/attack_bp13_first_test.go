//go:build attack

package lockcore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// ends counts the events that end an attempt.
func ends(rec *recorder) int {
	n := 0
	for _, k := range []lockcore.EventKind{lockcore.EventAcquired, lockcore.EventSkipped, lockcore.EventTimeout,
		lockcore.EventReentrant, lockcore.EventCanceled, lockcore.EventFailed} {
		n += rec.count(k)
	}
	return n
}

// TestAttackFirstAcquireRefusedByOrderEndsItsAttempt: the first acquire on
// a pool reports its attempt before it learns the database (so that a
// failure there is the attempt's). A strict order graph that then refuses
// it (ErrLockOrder) must end that attempt too: an observer (the metrics'
// attempts counter) sees every attempt end in one outcome. (On a pool that
// knows its database the refusal comes before any attempt, and reports
// neither, as on main.)
func TestAttackFirstAcquireRefusedByOrderEndsItsAttempt(t *testing.T) {
	t.Parallel()
	g := lockcore.NewOrderGraph()
	g.SetStrict(true)
	ctx := lockcore.WithOrder(context.Background(), g)
	warm, _ := newService(t, 2)
	x, y := lockcore.Pair(7301, 1), lockcore.Pair(7302, 1)
	if err := warm.With(ctx, x, func(ctx context.Context) error { return warm.With(ctx, y, noop) }); err != nil {
		t.Fatal(err)
	}
	first, rec := newService(t, 2) // a pool of its own, on the same database
	err := warm.With(ctx, y, func(ctx context.Context) error {
		_, err := first.Acquire(ctx, x)
		return err
	})
	if !errors.Is(err, lockcore.ErrLockOrder) {
		t.Fatalf("x under y, after y under x, on a fresh pool: %v, want ErrLockOrder", err)
	}
	if a, e := rec.count(lockcore.EventAttempt), ends(rec); a != e {
		t.Errorf("%d attempts reported, %d ended", a, e)
	}
}

// TestAttackIdentityReadOncePerPool: the database's identity is read on
// the first acquire through a pool, once: not again on later acquires,
// tries, nested acquires, or by a second Service on the same pool.
func TestAttackIdentityReadOncePerPool(t *testing.T) {
	t.Parallel()
	var reads, all atomic.Int32
	pool := pgtest.Pool(t, func(c *pgxpool.Config) {
		c.MaxConns = 3
		c.ConnConfig.Tracer = &sqlTracer{fn: func(sql string, _ []any) {
			all.Add(1)
			if strings.Contains(sql, "pg_control_system") {
				reads.Add(1)
			}
		}}
	})
	a, b := lockcore.New(pool), lockcore.New(pool)
	ctx := context.Background()
	for range 3 {
		k := freshAgent()
		err := a.With(ctx, k, func(ctx context.Context) error {
			if _, err := b.TryAcquire(ctx, k); !errors.Is(err, lockcore.ErrReentrant) {
				t.Errorf("the held key through a second Service on the pool: %v, want ErrReentrant", err)
			}
			return b.With(ctx, freshAgent(), noop)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("the identity was read %d times (of %d statements), want once per pool", n, all.Load())
	}
}

// TestAttackFirstAcquireCannotLearnTheDatabase: a first acquire that
// cannot read the database's identity (no server; a context already
// ended) fails as an acquire does, reported as one attempt that ended,
// and the next acquire tries again.
func TestAttackFirstAcquireCannotLearnTheDatabase(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none?connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rec := &recorder{}
	s := lockcore.New(pool, lockcore.Observe(rec.observe), lockcore.Wait(5*time.Second))
	for i := range 2 {
		_, err := s.Acquire(context.Background(), freshAgent())
		var ae *lockcore.AdvisoryLockError
		if !errors.As(err, &ae) || errors.Is(err, lockcore.ErrReentrant) {
			t.Fatalf("acquire %d with no server: %v, want an *AdvisoryLockError", i, err)
		}
	}
	if a, f := rec.count(lockcore.EventAttempt), rec.count(lockcore.EventFailed)+rec.count(lockcore.EventTimeout); a != 2 || f != 2 {
		t.Errorf("with no server: %d attempts, %d failures; want 2, 2", a, f)
	}
	live, rec2 := newService(t, 2)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := live.Acquire(cctx, freshAgent()); !errors.Is(err, context.Canceled) {
		t.Errorf("first acquire with an ended context: %v, want context.Canceled", err)
	}
	if a, c := rec2.count(lockcore.EventAttempt), rec2.count(lockcore.EventCanceled); a != 1 || c != 1 {
		t.Errorf("first acquire with an ended context: %d attempts, %d cancels; want 1, 1", a, c)
	}
	if err := live.With(context.Background(), freshAgent(), noop); err != nil {
		t.Errorf("an acquire after the cancelled first: %v", err)
	}
}

// TestAttackSpelledTwiceWithoutSystemIdentifier: a role that may not read
// pg_control_system, two pools that spell the server differently (the
// socket directory with a trailing slash): one database, so a nested
// acquire of a held key through the other pool is refused at once, not
// waited for until the wait runs out (pgident named the cluster by the
// connection's host, which the spelling changes).
func TestAttackSpelledTwiceWithoutSystemIdentifier(t *testing.T) {
	t.Parallel()
	dsn := freshDatabase(t)
	ctx := context.Background()
	admin := newPool(t, dsn, nil)
	if _, err := admin.Exec(ctx, "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	role := fmt.Sprintf("bp13_nosysid_%d", time.Now().UnixNano()%1e9)
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
	there := lockcore.New(newPool(t, roleDSN, func(c *pgxpool.Config) {
		if strings.HasPrefix(c.ConnConfig.Host, "/") {
			c.ConnConfig.Host += "/"
		} else {
			c.ConnConfig.Host = "localhost"
		}
	}), lockcore.NoFencing(), lockcore.Wait(3*time.Second))
	key := freshAgent()
	err = here.With(ctx, key, func(ctx context.Context) error {
		start := time.Now()
		if err := there.With(ctx, key, noop); !errors.Is(err, lockcore.ErrReentrant) {
			t.Errorf("nested acquire through the other spelling: %v after %v, want ErrReentrant", err, time.Since(start).Round(time.Millisecond))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
