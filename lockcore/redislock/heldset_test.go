package redislock

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/locktop/locktop/lockcore"
)

type heldsetKey struct{}

// TestLockContextCarriesTheHeldSet: a lock's context, however late it is
// first asked for (after the acquire returned, after a later acquire, after
// its release), carries the acquire's values and the held set as it was
// at the acquire: this lock on top of what the acquire's context held, in
// order, and the nested With's context carries the same chain.
func TestLockContextCarriesTheHeldSet(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.WithValue(context.Background(), heldsetKey{}, "v")
	a, err := l.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(a.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	// c is acquired under b's context; d under the caller's, before c's
	// context is asked for.
	c, err := l.Acquire(b.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.Acquire(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	chain := func(ctx context.Context) (keys []string) {
		for e := lockcore.Held(ctx); e != nil; e = e.Next() {
			keys = append(keys, e.Hold.(*Lock).Key())
		}
		return keys
	}
	for _, c := range []struct {
		k    *Lock
		want []string
	}{{d, []string{"d"}}, {c, []string{"c", "b", "a"}}, {b, []string{"b", "a"}}, {a, []string{"a"}}} {
		kctx := c.k.Context()
		if got := chain(kctx); !slices.Equal(got, c.want) {
			t.Errorf("%s's context holds %q, want %q", c.k.Key(), got, c.want)
		}
		if v := kctx.Value(heldsetKey{}); v != "v" {
			t.Errorf("%s's context lost the acquire's value: %v", c.k.Key(), v)
		}
		if _, err := l.TryAcquire(kctx, c.k.Key()); !errors.Is(err, ErrReentrant) {
			t.Errorf("%s again under its context: %v, want ErrReentrant", c.k.Key(), err)
		}
	}
	// With: fn's context carries the chain of its lock.
	err = l.With(b.Context(), "f", func(ctx context.Context) error {
		if got := chain(ctx); !slices.Equal(got, []string{"f", "b", "a"}) {
			t.Errorf("With's context holds %q, want f, b, a", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Released before its context was asked for: the context is ended,
	// and still carries the held set.
	e, err := l.Acquire(b.Context(), "e")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ectx := e.Context(); ectx.Err() == nil || !slices.Equal(chain(ectx), []string{"e", "b", "a"}) {
		t.Errorf("a released lock's context: Err %v, holds %q; want cancelled, holding e, b, a", ectx.Err(), chain(ectx))
	}
	for _, k := range []*Lock{d, c, b, a} {
		if err := k.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
