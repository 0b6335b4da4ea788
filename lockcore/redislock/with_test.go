package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// With keeps a hold alive past its TTL while fn runs, and releases it.
func TestWithExtendsPastTTL(t *testing.T) {
	// A TTL of a second: the keep-alive extends every third of it, and a
	// loaded box may stall it for a good part of a shorter one.
	l := newLocker(t, Options{TTL: time.Second})
	other := newLocker(t, Options{Prefix: l.prefix})
	ctx := context.Background()
	var fence int64
	err := l.With(ctx, "k", func(ctx context.Context) error {
		// Run for three TTLs; meanwhile nobody else may get the key (another
		// holder: with an unrelated context, not the body's, which holds it).
		end := time.After(3 * time.Second)
		for {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-end:
				return nil
			case <-time.After(50 * time.Millisecond):
			}
			if k, err := other.TryAcquire(context.Background(), "k"); !errors.Is(err, ErrLocked) {
				if k != nil {
					fence = k.Fence()
				}
				t.Errorf("another Locker took the key while With held it: %v", err)
				return nil
			}
		}
	})
	if err != nil {
		t.Fatalf("With: %v", err)
	}
	if fence != 0 {
		t.Fatal("the key was taken during With")
	}
	if held, err := l.IsLocked(ctx, "k"); err != nil || held {
		t.Errorf("after With the key is held = %v, %v", held, err)
	}
	if st := l.Stats(); st.Lost != 0 {
		t.Errorf("Lost = %d, want 0", st.Lost)
	}
}

// A hold deleted underneath (the seed's bare DELETE from another pod) is
// found by the next extend: fn's context is cancelled with cause ErrLost,
// and With reports the loss.
func TestWithCancelledWhenKeyDeleted(t *testing.T) {
	l := newLocker(t, Options{TTL: 600 * time.Millisecond})
	rdb := redistest.Client(t)
	ctx := context.Background()
	var cause error
	err := l.With(ctx, "k", func(ctx context.Context) error {
		if err := rdb.Del(ctx, l.prefix+"k").Err(); err != nil {
			t.Fatal(err)
		}
		within(t, "fn's context is cancelled", ctx.Done(), 10*time.Second)
		cause = context.Cause(ctx)
		return nil
	})
	if !errors.Is(cause, ErrLost) {
		t.Errorf("fn's context cause = %v, want ErrLost", cause)
	}
	if !errors.Is(err, ErrLost) {
		t.Errorf("With = %v, want ErrLost", err)
	}
	if st := l.Stats(); st.Lost != 1 {
		t.Errorf("Lost = %d, want 1", st.Lost)
	}
}

// A force release reaches the holder at once through its Locker's
// listener, is audited (who, why, the victim's owner, fence and a token
// prefix, never the whole token), and hands the key to the waiter.
func TestForceReleaseAudited(t *testing.T) {
	victim := newLocker(t, Options{Owner: "pod-a", TTL: time.Hour})
	admin := lockerOn(t, redistest.Client(t), Options{Prefix: victim.prefix, Owner: "operator"})
	ctx := context.Background()
	var cause error
	errc := make(chan error, 1)
	go func() {
		errc <- victim.With(ctx, "k", func(ctx context.Context) error {
			<-ctx.Done()
			cause = context.Cause(ctx)
			return ctx.Err()
		})
	}()
	var infos []redislocks.Info
	pgtest.Eventually(t, "the victim holds k", func() bool {
		tbl, _ := inspect(ctx, admin, 0)
		infos = tbl.Locks
		return len(infos) == 1
	})
	ok, err := admin.ForceRelease(ctx, "k", "stuck after a crash")
	if !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrLost) || !errors.Is(cause, ErrLost) {
			t.Errorf("victim's With = %v (cause %v), want ErrLost", err, cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the victim's fn was not cancelled")
	}
	recs, err := admin.Audit(ctx)
	if err != nil || len(recs) != 1 {
		t.Fatalf("Audit = %v, %v", recs, err)
	}
	r := recs[0]
	if r.Key != "k" || r.Actor != "operator" || r.Reason != "stuck after a crash" || r.VictimOwner != "pod-a" ||
		r.VictimFence != infos[0].Fence || r.VictimToken != infos[0].Token || len(r.VictimToken) != 6 || time.Since(r.At) > time.Minute {
		t.Errorf("audit record %+v; holder was %+v", r, infos[0])
	}
	if ok, err := admin.ForceRelease(ctx, "k", "again"); ok || err != nil {
		t.Errorf("ForceRelease of a free key = %v, %v", ok, err)
	}
	// Newest first.
	k, _ := admin.Acquire(ctx, "k")
	admin.ForceRelease(ctx, "k", "second")
	if recs, _ := admin.Audit(ctx); len(recs) != 2 || recs[0].Reason != "second" || recs[0].VictimFence != k.Fence() {
		t.Errorf("audit after a second force release: %+v", recs)
	}
}

// unreachable returns a Locker on a private server, and the server, with
// few retries so the tests of an unreachable Redis stay quick.
func unreachable(t *testing.T, opts Options) (*Locker, func(), func()) {
	srv := redistest.Private(t)
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries, opt.DialerRetries, opt.ContextTimeoutEnabled = 1, 1, true
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	l := lockerOn(t, rdb, opts)
	halt := srv.Halt
	resume := func() {
		if err := srv.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return l, halt, resume
}

// With Redis stopped every call says ErrUnavailable, never "held" or
// "timeout"; With fails closed by default.
func TestUnavailable(t *testing.T) {
	l, halt, resume := unreachable(t, Options{})
	ctx := context.Background()
	halt()
	_, err := l.Acquire(ctx, "k")
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLocked) || errors.Is(err, ErrTimeout) {
		t.Errorf("Acquire = %v, want ErrUnavailable only", err)
	}
	if _, err := l.TryAcquire(ctx, "k"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Acquire(lockcore.Wait(0)) = %v, want ErrUnavailable", err)
	}
	if _, err := l.IsLocked(ctx, "k"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("IsLocked = %v, want ErrUnavailable", err)
	}
	if _, err := l.Resume(ctx, "k", "tok"); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotHeld) {
		t.Errorf("Resume = %v, want ErrUnavailable only", err)
	}
	if err := l.Healthy(ctx); err == nil {
		t.Error("Healthy with Redis stopped")
	}
	ran := false
	if err := l.With(ctx, "k", func(context.Context) error { ran = true; return nil }); !errors.Is(err, ErrUnavailable) || ran {
		t.Errorf("With (fail closed) = %v, ran %v; want ErrUnavailable without running fn", err, ran)
	}
	if st := l.Stats(); st.FailOpen != 0 || st.RedisErrors < 3 || st.Timeouts != 0 {
		t.Errorf("stats %+v", st)
	}
	resume()
	// go-redis's pool, after PoolSize failed dials, answers with the last
	// dial error until a probe it makes every second gets through: Healthy
	// comes back within about a second of Redis, not at once (-cpu 1 made
	// the pool small enough to trip).
	pgtest.Eventually(t, "Healthy after Redis came back", func() bool { return l.Healthy(ctx) == nil })
}

// FailOpen runs fn without the lock when Redis is unreachable, and counts
// it; it never opens for a held key.
func TestFailOpen(t *testing.T) {
	l, halt, _ := unreachable(t, Options{FailOpen: true, Wait: 100 * time.Millisecond})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := l.With(ctx, "k", func(context.Context) error { ran = true; return nil }); !errors.Is(err, ErrTimeout) || ran {
		t.Errorf("With on a held key = %v, ran %v: fail-open must not open on a held key", err, ran)
	}
	k.Release(ctx)
	halt()
	if err := l.With(ctx, "k", func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("With (fail open) = %v, ran %v; want fn run", err, ran)
	}
	if st := l.Stats(); st.FailOpen != 1 {
		t.Errorf("FailOpen = %d, want 1", st.FailOpen)
	}
}

// A Redis that restarts empty (a failover that lost the lock's write) loses
// the hold. The Locker's listener reconnects and checks its holds, so fn is
// cancelled at once, not at the next extend (an hour away here).
func TestWithLostOnRestart(t *testing.T) {
	srv := redistest.Private(t)
	l := lockerOn(t, redistest.ClientOf(t, srv), Options{TTL: time.Hour})
	ctx := context.Background()
	err := l.With(ctx, "k", func(ctx context.Context) error {
		if err := srv.Restart(context.Background()); err != nil {
			t.Fatal(err)
		}
		within(t, "fn's context is cancelled", ctx.Done(), 10*time.Second)
		return nil
	})
	if !errors.Is(err, ErrLost) {
		t.Errorf("With = %v, want ErrLost", err)
	}
}

// A hold whose Redis stays away past its lease is declared lost by the
// lease timer: fn is cancelled even though no extend got an answer.
func TestWithLostWhileRedisAway(t *testing.T) {
	l, halt, _ := unreachable(t, Options{TTL: 500 * time.Millisecond})
	ctx := context.Background()
	err := l.With(ctx, "k", func(ctx context.Context) error {
		halt()
		within(t, "fn's context is cancelled", ctx.Done(), 10*time.Second)
		if c := context.Cause(ctx); !errors.Is(c, ErrLost) {
			t.Errorf("cause %v, want ErrLost", c)
		}
		return nil
	})
	if !errors.Is(err, ErrLost) {
		t.Errorf("With = %v, want ErrLost", err)
	}
}

// fn's error comes back; a panic releases the lock before it goes on.
func TestWithErrorAndPanic(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	boom := errors.New("boom")
	if err := l.With(ctx, "k", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("With = %v, want fn's error", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on")
			}
		}()
		l.With(ctx, "k", func(context.Context) error { panic("boom") })
	}()
	if held, err := l.IsLocked(ctx, "k"); err != nil || held {
		t.Errorf("after a panic the key is held = %v, %v", held, err)
	}
}

// Issue 31, fault 4: FailOpen opens only when Redis cannot be reached. A
// Redis that answers with an error (here OOM: maxmemory reached, so the
// waiter cannot register) is up, and another holder may hold the key: With
// must fail closed.
func TestFailOpenNotOnErrorReply(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	holder := lockerOn(t, rdb, Options{Owner: "holder"})
	open := lockerOn(t, rdb, Options{Owner: "open", FailOpen: true, Wait: replyWait})
	ctx := context.Background()
	if _, err := holder.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.ConfigSet(ctx, "maxmemory", "0")
	ran := false
	err := open.With(ctx, "k", func(context.Context) error { ran = true; return nil })
	if ran || err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("With (FailOpen) while another holds the key and Redis answers OOM: ran %v, err %v; want the OOM reply, fn not run", ran, err)
	}
	if n := open.Stats().FailOpen; n != 0 {
		t.Errorf("FailOpen counted %d", n)
	}
}
