package redislock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// A waiter keeps its token across its polls, so one token can hold a key
// twice: first by a hand-over it did not take (the notice came too late to
// trust, or was lost), then by its own poll's grant. A force release of
// the first grant must not end the second, whether its notice is
// remembered until the watch (revoked) or dispatched to the watched hold:
// the notice names the grant's fence, and only that grant ends.
func TestForceReleaseOfEarlierGrantOfToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		// late: the force notice is held back until the second grant is
		// watched (dispatched to a watched hold, not remembered).
		late bool
	}{{"remembered", false}, {"dispatched late", true}} {
		t.Run(tc.name, func(t *testing.T) {
			holder := newLocker(t, Options{Owner: "holder"})
			waiter := newLocker(t, Options{Prefix: holder.prefix, Owner: "waiter", TTL: time.Minute})
			admin := newLocker(t, Options{Prefix: holder.prefix, Owner: "admin"})
			ctx := context.Background()
			h, err := holder.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}

			parked, resume := make(chan struct{}), make(chan struct{})
			first := true
			awaiting.set(func() {
				if first {
					first = false
					close(parked)
					<-resume
				}
			})
			t.Cleanup(awaiting.clear)
			notices := make(chan string, 8)
			hold := make(chan struct{})
			beforeNotice.set(func() {
				notices <- ""
				if tc.late {
					<-hold
				}
			})
			t.Cleanup(beforeNotice.clear)

			type run struct {
				err    error
				cause  error
				held   bool
				fence  int64
				stolen string
			}
			done := make(chan run, 1)
			go func() {
				var r run
				r.err = waiter.With(ctx, "k", func(ctx context.Context) error {
					if tc.late {
						close(hold) // the force notice of the first grant is dispatched now
						r.stolen = "the late force notice was not dispatched"
						if arrived(waitNotices(notices, 1)) && arrived(marker(waiter, notices)) {
							r.stolen = ""
						}
					}
					r.cause = context.Cause(ctx)
					k := heldLock(ctx)
					if k != nil {
						r.fence = k.Fence()
						f, _, _, err := check(context.Background(), waiter.rdb, k.ks, k.token)
						r.held = err == nil && f == k.fence
					}
					return nil
				})
				done <- r
			}()
			within(t, "the waiter waits", parked, 10*time.Second)

			// The release hands the key to the waiter's token; the admin
			// force-releases that grant before the waiter took it.
			if err := h.Release(ctx); err != nil {
				t.Fatal(err)
			}
			tok := holderToken(t, holder, "k")
			handFence, err := holder.rdb.HGet(ctx, holder.prefix+"k", "f").Int64()
			if err != nil || tok == "" {
				t.Fatalf("no hand-over: holder %q, %v", tok, err)
			}
			if ok, err := admin.ForceRelease(ctx, "k", "stuck"); !ok || err != nil {
				t.Fatalf("ForceRelease = %v, %v", ok, err)
			}
			within(t, "the hand-over notice arrives", waitNotices(notices, 1), 10*time.Second)
			if !tc.late {
				within(t, "the force notice arrives", waitNotices(notices, 1), 10*time.Second)
				within(t, "a marker after it arrives", marker(waiter, notices), 10*time.Second)
			}
			// The waiter does not take the hand-over (as when its notice
			// came after half the claim had passed): it polls, and its own
			// grant comes.
			waiter.mu.Lock()
			if ch := waiter.waiters[tok]; ch != nil {
				select {
				case <-ch:
				default:
				}
				ch <- notice{}
			}
			waiter.mu.Unlock()
			close(resume)

			var r run
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("With did not return")
			}
			if r.stolen != "" {
				t.Fatal(r.stolen)
			}
			if r.fence <= handFence || !r.held {
				t.Fatalf("the waiter ran under fence %d (held by Redis: %v), want a grant of its own after the hand-over's %d", r.fence, r.held, handFence)
			}
			if r.cause != nil || r.err != nil {
				t.Errorf("a grant Redis still held (fence %d) was ended by the force release of its token's earlier grant (fence %d): fn's cause %v, With = %v",
					r.fence, handFence, r.cause, r.err)
			}
		})
	}
}

// waitNotices returns a channel closed once n notices were seen.
func waitNotices(notices <-chan string, n int) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		for range n {
			<-notices
		}
		close(c)
	}()
	return c
}

// marker publishes a notice nobody acts on and returns a channel closed
// once it is about to be dispatched: the notices before it have been.
func marker(l *Locker, notices <-chan string) <-chan struct{} {
	_ = l.rdb.Publish(context.Background(), l.channel, "marker").Err()
	return waitNotices(notices, 1)
}

// arrived reports whether ch closes within 10s (a guard against a hang).
func arrived(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// heldLock returns the redislock Lock ctx holds, if any.
func heldLock(ctx context.Context) *Lock {
	for e := lockcore.Held(ctx); e != nil; e = e.Next() {
		if k, ok := e.Hold.(*Lock); ok {
			return k
		}
	}
	return nil
}

// A grant resumed by its token in the process that holds it (a workflow's
// step 2 while step 1 still watches) has two watched Locks: the force
// release announced to the Locker ends both (the second watch used to
// replace the first, which learnt of it only at its next extend).
func TestForceReleaseEndsEveryLockOfTheGrant(t *testing.T) {
	l := newLocker(t, Options{Owner: "p", TTL: time.Minute})
	admin := newLocker(t, Options{Prefix: l.prefix, Owner: "admin"})
	ctx := context.Background()
	within(t, "the listener subscribes", l.listen(), 10*time.Second)
	defer l.unlisten()
	k1, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := l.Resume(ctx, "k", k1.Token())
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := k1.Context(), k2.Context()
	if ok, err := admin.ForceRelease(ctx, "k", "test"); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	for i, c := range []context.Context{c1, c2} {
		select {
		case <-c.Done():
			if !errors.Is(context.Cause(c), ErrLost) {
				t.Errorf("lock %d: cause %v", i+1, context.Cause(c))
			}
		case <-time.After(3 * time.Second):
			t.Errorf("lock %d of the same grant was not told of its force release", i+1)
		}
	}
}
