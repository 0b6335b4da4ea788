package redislock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// TestScriptArguments: what an acquire sends is the Locker's owner, TTL
// and channel unless the call says otherwise (lockcore.TTL, the task's
// owner), a wait registers with waiterTTL (as changed by tests too) and
// the acquire's TTL, owner and channel, and a single try registers nothing.
func TestScriptArguments(t *testing.T) {
	l := newLocker(t, Options{Owner: "locker-owner", TTL: 40 * time.Second})
	ctx := context.Background()
	hold := func(key, wantOwner string, maxTTL time.Duration) {
		t.Helper()
		ks := keysFor(l.prefix, key)
		owner, err := l.rdb.HGet(ctx, ks.hold, "o").Result()
		if err != nil || owner != wantOwner {
			t.Errorf("%s: owner %q (%v), want %q", key, owner, err, wantOwner)
		}
		if left := l.rdb.PTTL(ctx, ks.hold).Val(); left <= maxTTL-10*time.Second || left > maxTTL {
			t.Errorf("%s: PTTL %v, want just under %v", key, left, maxTTL)
		}
	}
	a, err := l.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	hold("a", "locker-owner", 40*time.Second)
	b, err := l.Acquire(ctx, "b", lockcore.TTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hold("b", "locker-owner", 20*time.Second)
	c, err := l.TryAcquire(lockcore.WithOwner(ctx, "task-owner"), "c", lockcore.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hold("c", "task-owner", 30*time.Second)

	// A single try on a held key registers nothing.
	if _, err := l.TryAcquire(ctx, "a"); err == nil {
		t.Fatal("TryAcquire of a held key succeeded")
	}
	ks := keysFor(l.prefix, "a")
	if n := l.rdb.HLen(ctx, ks.info).Val(); n != 0 {
		t.Errorf("a single try left %d registrations", n)
	}

	// Waits, with the default waiterTTL and a changed one.
	for _, c := range []struct {
		wttl  time.Duration
		owner string
		ttl   time.Duration
	}{{defaultWaiterTTL, "locker-owner", 40 * time.Second}, {7 * time.Second, "task-owner", 25 * time.Second}} {
		func() {
			defer func(d time.Duration) { waiterTTL = d }(waiterTTL)
			waiterTTL = c.wttl
			l2 := newLocker(t, Options{Prefix: l.prefix, Owner: "locker-owner", TTL: 40 * time.Second})
			registered := make(chan struct{})
			afterRegister.set(func(context.Context) { close(registered) })
			defer afterRegister.clear()
			wctx := ctx
			if c.owner != "locker-owner" {
				wctx = lockcore.WithOwner(ctx, c.owner)
			}
			wctx, cancel := context.WithCancel(wctx)
			defer cancel()
			var opts []lockcore.AcquireOption
			if c.ttl != 40*time.Second {
				opts = append(opts, lockcore.TTL(c.ttl))
			}
			done := make(chan error, 1)
			go func() {
				_, err := l2.Acquire(wctx, "a", append(opts, lockcore.Wait(time.Minute))...)
				done <- err
			}()
			within(t, "the waiter's registration", registered, 30*time.Second)
			regs := l.rdb.HGetAll(ctx, ks.info).Val()
			if len(regs) != 1 {
				t.Fatalf("%d registrations, want 1", len(regs))
			}
			for _, reg := range regs {
				f := strings.Fields(reg)
				if len(f) != 4 || f[1] != strconv.FormatInt(ms(c.ttl), 10) || f[2] != l2.channel || f[3] != c.owner {
					t.Errorf("registration %q, want ttl %v, channel %s, owner %s", reg, ms(c.ttl), l2.channel, c.owner)
				}
			}
			if left := l.rdb.PTTL(ctx, ks.info).Val(); left <= c.wttl-5*time.Second || left > c.wttl {
				t.Errorf("registrations' PTTL %v, want just under %v", left, c.wttl)
			}
			cancel()
			<-done
		}()
	}
	for _, k := range []*Lock{a, b, c} {
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
