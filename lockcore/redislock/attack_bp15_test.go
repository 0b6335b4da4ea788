//go:build attack

package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// oldKeys is keysFor's formula before the names were cut from one string:
// hold, queue, info, fence and the tag, each its own concatenation.
func oldKeys(prefix, key string) (all [4]string, tag string) {
	hold := prefix + key
	tag = "{" + slotTag(keySlot(hold)) + "}" + prefix
	return [4]string{hold, tag + "q:" + key, tag + "w:" + key, tag + "fence"}, tag
}

// bp15Names are prefixes and keys that stress the slicing of keysFor:
// braces where the hold's own hash tag comes from, empty and unbalanced
// ones, multi-byte runes, and a key long enough that a miscounted offset
// shows.
var bp15Names = [][2]string{
	{"", "k"}, {"{", "}"}, {"}", "{"}, {"{}", "{}"}, {"p{x}:", "k"}, {"p:", "{tag}rest"},
	{"{a}", "{b}"}, {"p:", "{}{x}"}, {"{{}}", "}}{{"}, {"é:", "日本:🔒"}, {"🔒{", "}é"},
	{"p:", strings.Repeat("k{é}", 16<<10)}, {strings.Repeat("{p}", 1000), "k"},
	{"p:", "q:w:fence"}, {"p:", "\x00\xff{\x00}"},
}

// TestAttackBp15KeyNamesAsBefore: keysFor gives exactly the old names for
// every prefix and key, all() in the scripts' order with no room to append
// into, and forced() behind the old tag.
func TestAttackBp15KeyNamesAsBefore(t *testing.T) {
	for _, c := range bp15Names {
		prefix, key := c[0], c[1]
		want, tag := oldKeys(prefix, key)
		ks := keysFor(prefix, key)
		got := [4]string{ks.hold, ks.queue, ks.info, ks.fence}
		if got != want || ks.tag != tag || ks.keys != want {
			t.Errorf("keysFor(%.40q, %.40q): names %.60q, keys %.60q, tag %.40q; want %.60q, tag %.40q", prefix, key, got, ks.keys, ks.tag, want, tag)
		}
		all := ks.all()
		if len(all) != 4 || cap(all) != 4 || [4]string(all) != want {
			t.Errorf("keysFor(%.40q, %.40q).all(): len %d cap %d", prefix, key, len(all), cap(all))
		}
		if id := "x"; ks.forced(id) != tag+"forced:"+id {
			t.Errorf("keysFor(%.40q, %.40q).forced: %.60q", prefix, key, ks.forced(id))
		}
		for i, n := range got {
			if keySlot(n) != keySlot(ks.hold) {
				t.Errorf("keysFor(%.40q, %.40q): name %d is in slot %d, the hold in %d", prefix, key, i, keySlot(n), keySlot(ks.hold))
			}
		}
	}
}

// TestAttackBp15UnusualNamesInRedis: under each unusual prefix and key a
// lock is taken, queued for and handed over in Redis under the old names:
// the hold at prefix+key, the waiter in the old queue and registrations,
// the fence counter the old one; the release hands the key to the waiter
// and the last release leaves no hold, queue or registration.
func TestAttackBp15UnusualNamesInRedis(t *testing.T) {
	ctx := context.Background()
	base := redistest.Prefix(t)
	rdb := redistest.Client(t)
	for i, c := range bp15Names {
		prefix := base + strconv.Itoa(i) + ":" + c[0]
		key := c[1]
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			redistest.DeletePrefix(cctx, rdb, prefix)
		})
		names, _ := oldKeys(prefix, key)
		hold, queue, info, fence := names[0], names[1], names[2], names[3]
		holder := lockerOn(t, rdb, Options{Prefix: prefix, Owner: "holder"})
		waiter := lockerOn(t, rdb, Options{Prefix: prefix, Owner: "waiter", Wait: 30 * time.Second})
		k, err := holder.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("%d: acquire: %v", i, err)
		}
		if o := rdb.HGet(ctx, hold, "o").Val(); o != "holder" {
			t.Errorf("%d: the hold's owner at the old name: %q", i, o)
		}
		if f, _ := rdb.Get(ctx, fence).Int64(); f != k.Fence() {
			t.Errorf("%d: the old fence counter %d, the grant's fence %d", i, f, k.Fence())
		}
		if ok, err := holder.IsLocked(ctx, key); !ok || err != nil {
			t.Errorf("%d: IsLocked: %v, %v", i, ok, err)
		}
		got := make(chan *Lock, 1)
		werr := make(chan error, 1)
		go func() {
			w, err := waiter.Acquire(ctx, key)
			if err != nil {
				werr <- err
				return
			}
			got <- w
		}()
		pgtest.Eventually(t, "the waiter in the old queue and registrations", func() bool {
			return rdb.ZCard(ctx, queue).Val() == 1 && rdb.HLen(ctx, info).Val() == 1
		})
		if err := k.Release(ctx); err != nil {
			t.Fatalf("%d: release: %v", i, err)
		}
		var w *Lock
		select {
		case w = <-got:
		case err := <-werr:
			t.Fatalf("%d: the waiter: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d: the waiter was not handed the key", i)
		}
		if w.Fence() <= k.Fence() {
			t.Errorf("%d: the waiter's fence %d, not above the holder's %d", i, w.Fence(), k.Fence())
		}
		if o := rdb.HGet(ctx, hold, "o").Val(); o != "waiter" {
			t.Errorf("%d: after the hand-over the hold's owner is %q", i, o)
		}
		if err := w.Release(ctx); err != nil {
			t.Fatalf("%d: the waiter's release: %v", i, err)
		}
		if n := rdb.Exists(ctx, hold, queue, info).Val(); n != 0 {
			t.Errorf("%d: %d of hold, queue, registrations left after the last release", i, n)
		}
		// A force release finds the same hold.
		k, err = holder.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("%d: acquire again: %v", i, err)
		}
		if ok, err := holder.ForceRelease(ctx, key, "bp15"); !ok || err != nil {
			t.Errorf("%d: force release: %v, %v", i, ok, err)
		}
		if rdb.Exists(ctx, hold).Val() != 0 {
			t.Errorf("%d: the hold survived its force release", i)
		}
	}
}

// twoStores returns two Lockers on one server, in databases 0 and 1: two
// stores, so that their keys (of the one class "redis") are ordered.
func twoStores(t *testing.T) (a, b *Locker) {
	srv := redistest.Private(t)
	db := func(n int) *redis.Client {
		c := redistest.ClientOf(t, srv)
		opt := *c.Options()
		opt.DB = n
		d := redis.NewClient(&opt)
		t.Cleanup(func() { d.Close() })
		return d
	}
	a, b = lockerOn(t, db(0), Options{Owner: "a"}), lockerOn(t, db(1), Options{Owner: "b"})
	if a.store == b.store {
		t.Fatalf("two databases, one store %q", a.store)
	}
	return a, b
}

// TestAttackBp15LateContextFromManyGoroutines: a lock whose context is
// first asked for after other acquires and releases on the acquire's
// context (whose contexts hold outer, not it), by sixteen goroutines at
// once (Context, Done or Err first), gives them all one context that
// holds the lock (Find by its store and name) on top of what the acquire's
// context held: each one's nested acquire of the key is ErrReentrant, and
// of other keys on the other store teaches the order A then B. A lock on
// B whose context is asked for only then, after the lesson, cannot take a
// key of A (ErrLockOrder, the graph strict).
func TestAttackBp15LateContextFromManyGoroutines(t *testing.T) {
	la, lb := twoStores(t)
	g := lockcore.NewOrderGraph()
	g.SetStrict(true)
	g.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx0 := lockcore.WithOrder(context.Background(), g)
	bg := context.Background()

	outer, err := la.Acquire(ctx0, "outer")
	if err != nil {
		t.Fatal(err)
	}
	octx := outer.Context()
	x, err := la.Acquire(octx, "x")
	if err != nil {
		t.Fatal(err)
	}
	// Other acquires and releases on the same context, before x's context
	// is asked for.
	for i := range 3 {
		z, err := la.Acquire(octx, "z"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		zctx := z.Context()
		if err := z.Release(bg); err != nil {
			t.Fatal(err)
		}
		// A sibling's context holds z (ended) on outer, not x.
		if e := lockcore.Find(zctx, lockcore.KindRedis, la.store, z.ks.hold); e == nil || e.Hold != lockcore.Hold(z) || e.Hold.Err() == nil {
			t.Errorf("z's context does not hold z, ended: %v", e)
		}
		if lockcore.Find(zctx, lockcore.KindRedis, la.store, x.ks.hold) != nil || lockcore.Find(zctx, lockcore.KindRedis, la.store, outer.ks.hold) == nil {
			t.Errorf("z's context holds x, or not outer")
		}
	}
	const n = 16
	ctxs := make([]context.Context, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var c context.Context
			switch i % 3 { // first call by any of the three
			case 0:
				c = x.Context()
			case 1:
				if x.Done() == nil {
					t.Errorf("x.Done is nil")
				}
			case 2:
				if err := x.Err(); err != nil {
					t.Errorf("x.Err while held: %v", err)
				}
			}
			if c == nil {
				c = x.Context()
			}
			ctxs[i] = c
			e := lockcore.Held(c)
			if e == nil || e.Hold != lockcore.Hold(x) || e.Next() == nil || e.Next().Hold != lockcore.Hold(outer) || e.Next().Next() != nil {
				t.Errorf("goroutine %d: x's context does not hold x on outer", i)
			}
			if f := lockcore.Find(c, lockcore.KindRedis, la.store, x.ks.hold); f != e {
				t.Errorf("goroutine %d: Find of x in its context: %v", i, f)
			}
			if f := lockcore.Find(c, lockcore.KindRedis, lb.store, x.ks.hold); f != nil {
				t.Errorf("goroutine %d: Find of x on the other store found %v", i, f)
			}
			for _, key := range []string{"x", "outer"} {
				if _, err := la.TryAcquire(c, key); !errors.Is(err, ErrReentrant) {
					t.Errorf("goroutine %d: %s under x's context: %v, want ErrReentrant", i, key, err)
				}
			}
			w, err := lb.TryAcquire(c, "w"+strconv.Itoa(i))
			if err != nil {
				t.Errorf("goroutine %d: a key of B under x's context: %v", i, err)
				return
			}
			if e := lockcore.Held(w.Context()); e.Next() == nil || e.Next().Hold != lockcore.Hold(x) {
				t.Errorf("goroutine %d: w's context is not pushed on x's", i)
			}
			if err := w.Release(bg); err != nil {
				t.Errorf("goroutine %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i := range ctxs {
		if ctxs[i] != ctxs[0] {
			t.Fatalf("goroutine %d got a context of its own", i)
		}
	}

	// y on B, its context asked for only after the lesson A then B.
	y, err := lb.Acquire(ctx0, "y")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		z, err := lb.Acquire(ctx0, "yz"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := z.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := la.TryAcquire(y.Context(), "v"); !errors.Is(err, lockcore.ErrLockOrder) {
		t.Errorf("a key of A under y's (B) late context: %v, want ErrLockOrder", err)
	}
	for _, k := range []*Lock{y, x, outer} {
		if err := k.Release(bg); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAttackBp15ContextFirstAskedAfterTheEnd: a lock whose context is
// first asked for after its release, or after it was found lost (a TTL
// call found the key gone; its TTL ran out in Redis), gets a context that
// is cancelled with the right cause and still carries the held set, and
// Err, Done and Find agree; under its values without the cancellation
// the key is no reentrancy (the hold ended) but a free key, while the
// acquire's own held lock still is.
func TestAttackBp15ContextFirstAskedAfterTheEnd(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	outer, err := l.Acquire(ctx, "outer")
	if err != nil {
		t.Fatal(err)
	}
	octx := outer.Context()
	ends := []struct {
		name  string
		cause error
		end   func(k *Lock)
	}{
		{"released", ErrReleased, func(k *Lock) {
			if err := k.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"found gone", ErrLost, func(k *Lock) {
			if err := l.rdb.Del(ctx, k.ks.hold).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := k.TTL(ctx); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("TTL of a deleted hold: %v", err)
			}
		}},
		{"expired", ErrLost, func(k *Lock) {
			pgtest.Eventually(t, "the hold expired in Redis", func() bool {
				return l.rdb.Exists(ctx, k.ks.hold).Val() == 0
			})
		}},
	}
	for _, c := range ends {
		var opts []lockcore.AcquireOption
		if c.name == "expired" {
			opts = append(opts, lockcore.TTL(50*time.Millisecond))
		}
		k, err := l.Acquire(octx, c.name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		c.end(k)
		var kctx context.Context
		if c.name == "expired" {
			// Err first: it finds the lease run out.
			if err := k.Err(); !errors.Is(err, c.cause) {
				t.Errorf("%s: first Err %v, want %v", c.name, err, c.cause)
			}
		}
		kctx = k.Context()
		within(t, c.name+": Done closed", k.Done(), 10*time.Second)
		if cause := context.Cause(kctx); !errors.Is(cause, c.cause) {
			t.Errorf("%s: the context's cause %v, want %v", c.name, cause, c.cause)
		}
		if err := k.Err(); !errors.Is(err, c.cause) {
			t.Errorf("%s: Err %v, want %v", c.name, err, c.cause)
		}
		e := lockcore.Held(kctx)
		if e == nil || e.Hold != lockcore.Hold(k) || e.Next() == nil || e.Next().Hold != lockcore.Hold(outer) {
			t.Errorf("%s: the ended lock's context does not carry it on outer", c.name)
		}
		if f := lockcore.Find(kctx, lockcore.KindRedis, l.store, k.ks.hold); f != e || f.Hold.Err() == nil {
			t.Errorf("%s: Find in the ended lock's context: %v, ended %v", c.name, f, f != nil && f.Hold.Err() != nil)
		}
		// Under the acquire's values without the cancellation (as With's
		// clean-up does), the key is no reentrancy: it ended, and is free.
		again, err := l.TryAcquire(context.WithoutCancel(kctx), c.name)
		if err != nil {
			t.Errorf("%s: the key again under the ended lock's context: %v", c.name, err)
			continue
		}
		if _, err := l.TryAcquire(context.WithoutCancel(kctx), "outer"); !errors.Is(err, ErrReentrant) {
			t.Errorf("%s: outer under it: %v, want ErrReentrant", c.name, err)
		}
		if err := again.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAttackBp15Resumed: a resumed lock (not acquired in this process)
// has a context that holds nothing and ends with the hold; asked for from
// many goroutines at once it is one context; its key under it is not
// reentrancy but held (ErrLocked), and With's machinery (run) works on it.
func TestAttackBp15Resumed(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Resume(ctx, "r", k.Token())
	if err != nil {
		t.Fatal(err)
	}
	if r.entry() != nil {
		t.Errorf("a resumed lock has an entry")
	}
	const n = 8
	ctxs := make([]context.Context, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ctxs[i] = r.Context() })
	}
	wg.Wait()
	for i, c := range ctxs {
		if c != ctxs[0] || lockcore.Held(c) != nil || c.Err() != nil {
			t.Errorf("goroutine %d: resumed context: same %v, holds %v, err %v", i, c == ctxs[0], lockcore.Held(c), c.Err())
		}
	}
	if _, err := l.TryAcquire(ctxs[0], "r"); !errors.Is(err, ErrLocked) {
		t.Errorf("the key under the resumed lock's context: %v, want ErrLocked", err)
	}
	ran := false
	if err := r.run(ctx, func(fctx context.Context) error {
		ran = true
		if lockcore.Held(fctx) != nil {
			t.Errorf("a resumed lock's With context holds %v", lockcore.Held(fctx))
		}
		return nil
	}); err != nil || !ran {
		t.Errorf("run on a resumed lock: %v, ran %v", err, ran)
	}
	if cause := context.Cause(ctxs[0]); !errors.Is(cause, ErrReleased) {
		t.Errorf("the resumed context after run's release: %v", cause)
	}
	if err := k.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("the original's release after the resumed one's: %v", err)
	}
}

// TestAttackBp15KeysetsNeverAlias: locks made, appended to, copied and
// released by many goroutines at once (with force releases, which append
// to all()) each keep exactly their own key's names.
func TestAttackBp15KeysetsNeverAlias(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	const n, rounds = 8, 10
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for r := range rounds {
				key := fmt.Sprintf("{g%d}é%d", g, r)
				want, _ := oldKeys(l.prefix, key)
				k, err := l.Acquire(ctx, key)
				if err != nil {
					t.Error(err)
					return
				}
				more := append(k.ks.all(), "extra-"+key)
				more[0] = "overwritten"
				cp := k.ks
				cp.keys[1] = "overwritten"
				cp.all()[2] = "overwritten"
				if [4]string(k.ks.all()) != want || k.ks.hold != want[0] {
					t.Errorf("%s: the lock's keys %q, want %q", key, k.ks.all(), want)
				}
				if err := k.Release(ctx); err != nil {
					t.Errorf("%s: %v", key, err)
				}
				// A force release of a key free now: it finds none.
				if ok, err := l.ForceRelease(ctx, key, "bp15"); ok || err != nil {
					t.Errorf("%s: force release after the release: %v, %v", key, ok, err)
				}
				if [4]string(k.ks.all()) != want {
					t.Errorf("%s: the lock's keys changed: %q", key, k.ks.all())
				}
			}
		})
	}
	wg.Wait()
}

// TestAttackBp15ArgumentsUnderLoad: many goroutines acquire at once, some
// with the Locker's owner and TTL, some with their own (lockcore.TTL,
// lockcore.WithOwner; a TTL longer and one shorter than the Locker's),
// some waiting and handed the key: each hold in Redis has its acquire's
// owner and TTL, never another's.
func TestAttackBp15ArgumentsUnderLoad(t *testing.T) {
	l := newLocker(t, Options{Owner: "locker", TTL: 40 * time.Second, Wait: 30 * time.Second})
	ctx := context.Background()
	const n, rounds = 8, 6
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			for r := range rounds {
				key := fmt.Sprintf("g%d:%d", g, r)
				actx, owner, ttl := ctx, "locker", 40*time.Second
				var opts []lockcore.AcquireOption
				switch (g + r) % 4 {
				case 1: // longer than the Locker's
					ttl = 60 * time.Second
					opts = append(opts, lockcore.TTL(ttl))
				case 2:
					owner = fmt.Sprintf("task-%d-%d", g, r)
					actx = lockcore.WithOwner(ctx, owner)
				case 3:
					owner, ttl = fmt.Sprintf("task-%d-%d", g, r), 25*time.Second
					actx = lockcore.WithOwner(ctx, owner)
					opts = append(opts, lockcore.TTL(ttl))
				}
				acq := l.Acquire
				if r%2 == 1 {
					acq = l.TryAcquire
				}
				k, err := acq(actx, key, opts...)
				if err != nil {
					t.Error(err)
					return
				}
				if k.Owner() != owner {
					t.Errorf("%s: Owner() %q, want %q", key, k.Owner(), owner)
				}
				hold := keysFor(l.prefix, key).hold
				if o := l.rdb.HGet(ctx, hold, "o").Val(); o != owner {
					t.Errorf("%s: the hold's owner in Redis %q, want %q", key, o, owner)
				}
				if left := l.rdb.PTTL(ctx, hold).Val(); left <= ttl-15*time.Second || left > ttl {
					t.Errorf("%s: PTTL %v, want just under %v", key, left, ttl)
				}
				if err := k.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	// Meanwhile, a waiter with its own owner and TTL is handed a key:
	// the hold it takes up has them.
	wg.Go(func() {
		key := "handed"
		k, err := l.Acquire(ctx, key)
		if err != nil {
			t.Error(err)
			return
		}
		got := make(chan *Lock, 1)
		go func() {
			w, err := l.Acquire(lockcore.WithOwner(ctx, "waiter-task"), key, lockcore.TTL(15*time.Second))
			if err != nil {
				t.Error(err)
				close(got)
				return
			}
			got <- w
		}()
		hold := keysFor(l.prefix, key)
		pgtest.Eventually(t, "the waiter registered", func() bool { return l.rdb.HLen(ctx, hold.info).Val() == 1 })
		if err := k.Release(ctx); err != nil {
			t.Error(err)
			return
		}
		w, ok := <-got
		if !ok {
			return
		}
		if err := w.takenUp(ctx); err != nil {
			t.Error(err)
		}
		if o := l.rdb.HGet(ctx, hold.hold, "o").Val(); o != "waiter-task" || w.Owner() != "waiter-task" {
			t.Errorf("the handed hold's owner %q (Owner() %q), want waiter-task", o, w.Owner())
		}
		if left := l.rdb.PTTL(ctx, hold.hold).Val(); left <= 5*time.Second || left > 15*time.Second {
			t.Errorf("the handed hold's PTTL %v, want just under 15s", left)
		}
		if err := w.Release(ctx); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
}

// TestAttackBp15UnusualNamesOnACluster: on a Redis Cluster, which refuses
// a script whose keys span slots (CROSSSLOT), every unusual prefix and key
// is acquired, refused to a second Locker, released and force-released;
// the cluster puts each of the lock's names in the hold's slot.
func TestAttackBp15UnusualNamesOnACluster(t *testing.T) {
	cc := redistest.Cluster(t)
	ctx := context.Background()
	base := redistest.Prefix(t)
	for i, c := range bp15Names {
		prefix, key := base+strconv.Itoa(i)+":"+c[0], c[1]
		ks := keysFor(prefix, key)
		want, err := cc.ClusterKeySlot(ctx, ks.hold).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ks.all() {
			if s := cc.ClusterKeySlot(ctx, n).Val(); s != want {
				t.Errorf("%d: %.40q is in slot %d, the hold in %d", i, n, s, want)
			}
		}
		a := lockerOn(t, cc, Options{Prefix: prefix, Owner: "a"})
		b := lockerOn(t, cc, Options{Prefix: prefix, Owner: "b"})
		k, err := a.Acquire(ctx, key)
		if err != nil {
			t.Fatalf("%d: acquire: %v", i, err)
		}
		if _, err := b.TryAcquire(ctx, key); !errors.Is(err, ErrLocked) {
			t.Errorf("%d: a second Locker's try: %v, want ErrLocked", i, err)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatalf("%d: release: %v", i, err)
		}
		k, err = b.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("%d: the second Locker after the release: %v", i, err)
		}
		if ok, err := a.ForceRelease(ctx, key, "bp15"); !ok || err != nil {
			t.Errorf("%d: force release: %v, %v", i, ok, err)
		}
		if err := k.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Errorf("%d: release after the force release: %v, want ErrNotHeld", i, err)
		}
	}
}

// TestAttackBp15FirstContextRacesTheEnd: the first asks for a lock's
// context (Context, Done, Err, and With's entry through run) race its
// release or its loss: every goroutine gets the one context, holding the
// lock on the acquire's, and it ends with the cause that won.
func TestAttackBp15FirstContextRacesTheEnd(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	outer, err := l.Acquire(ctx, "outer")
	if err != nil {
		t.Fatal(err)
	}
	octx := outer.Context()
	for r := range 20 {
		key := "k" + strconv.Itoa(r)
		k, err := l.Acquire(octx, key)
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		ctxs := make([]context.Context, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				switch i % 4 {
				case 0:
					_ = k.Err()
				case 1:
					_ = k.Done()
				case 2:
					if e := k.entry(); e == nil || e.Hold != lockcore.Hold(k) {
						t.Errorf("%s: entry %v", key, e)
					}
				}
				ctxs[i] = k.Context()
			})
		}
		wg.Go(func() {
			<-start
			if r%2 == 0 {
				if err := k.Release(ctx); err != nil {
					t.Errorf("%s: %v", key, err)
				}
				return
			}
			l.rdb.Del(ctx, k.ks.hold)
			if _, err := k.TTL(ctx); !errors.Is(err, ErrNotHeld) {
				t.Errorf("%s: TTL of a deleted hold: %v", key, err)
			}
		})
		close(start)
		wg.Wait()
		want := ErrReleased
		if r%2 == 1 {
			want = ErrLost
		}
		for i, c := range ctxs {
			if c != ctxs[0] {
				t.Fatalf("%s: goroutine %d got a context of its own", key, i)
			}
		}
		within(t, key+"'s context cancelled", ctxs[0].Done(), 10*time.Second)
		if cause := context.Cause(ctxs[0]); !errors.Is(cause, want) {
			t.Errorf("%s: cause %v, want %v", key, cause, want)
		}
		if e := lockcore.Held(ctxs[0]); e == nil || e.Hold != lockcore.Hold(k) || e.Next() == nil || e.Next().Hold != lockcore.Hold(outer) {
			t.Errorf("%s: the context does not hold it on outer", key)
		}
	}
	if err := outer.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
