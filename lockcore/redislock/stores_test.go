package redislock

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// The same key on two Redis servers, or two databases of one, is two
// locks: holding it through one Locker, a context takes it through the
// other (in either nesting) as any other lock, while a Locker on the same
// server and database, through the same client or another one, still
// refuses it as reentrant. Two prefixes are two keys, as ever.
func TestSameKeyTwoStoresIsTwoLocks(t *testing.T) {
	srv := redistest.Private(t)
	other := redistest.ClientOf(t, srv)
	db1 := func() *redis.Client {
		opt := *other.Options()
		opt.DB = 1
		c := redis.NewClient(&opt)
		t.Cleanup(func() { c.Close() })
		return c
	}()
	shared := redistest.Client(t)
	prefix := redistest.Prefix(t)
	for _, p := range []struct {
		name string
		a, b redis.UniversalClient
		pb   string
	}{
		{"two servers", shared, other, prefix},
		{"two databases", other, db1, prefix},
		{"two prefixes", shared, shared, prefix + "b:"},
	} {
		t.Run(p.name, func(t *testing.T) {
			a := lockerOn(t, p.a, Options{Prefix: prefix})
			b := lockerOn(t, p.b, Options{Prefix: p.pb})
			nestKeys(t, a, b)
			nestKeys(t, b, a)
		})
	}
	t.Run("same store", func(t *testing.T) {
		again := redis.NewClient(shared.Options()) // another client, the same server
		t.Cleanup(func() { again.Close() })
		a := lockerOn(t, shared, Options{Prefix: prefix})
		for _, b := range []*Locker{a, lockerOn(t, shared, Options{Prefix: prefix}), lockerOn(t, again, Options{Prefix: prefix})} {
			outer, err := a.Acquire(context.Background(), "k")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.TryAcquire(outer.Context(), "k"); !errors.Is(err, ErrReentrant) {
				t.Errorf("the held key through a Locker on the same store: %v, want ErrReentrant", err)
			}
			if err := outer.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// nestKeys takes k through outer, then k through inner in the outer
// lock's context; each store still refuses its own held key.
func nestKeys(t *testing.T, outer, inner *Locker) {
	t.Helper()
	// A graph of its own: nesting both ways is an order inversion, which
	// is the family graph's to report, not this test's.
	ctx := lockcore.WithOrder(context.Background(), lockcore.NewOrderGraph())
	err := outer.With(ctx, "k", func(ctx context.Context) error {
		return inner.With(ctx, "k", func(ctx context.Context) error {
			for _, l := range []*Locker{outer, inner} {
				if _, err := l.TryAcquire(ctx, "k"); !errors.Is(err, ErrReentrant) {
					t.Errorf("k again through a Locker that holds it: %v, want ErrReentrant", err)
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("k through the second store while the first holds it: %v", err)
	}
}
