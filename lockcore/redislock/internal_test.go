package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// registerWaiter makes token a waiter of key directly, as a waiter in another
// process would, with a registration that lives wttl.
func registerWaiter(t *testing.T, l *Locker, key, token string, wttl time.Duration) {
	t.Helper()
	ks := keysFor(l.prefix, key)
	v, err := acquireScript.Run(context.Background(), l.rdb, ks.all(),
		token, 60000, "ghost", l.prefix+"notice:nobody", "w", ms(wttl)).Slice()
	if err != nil || v[0].(int64) != 0 {
		t.Fatalf("registering %s: %v, %v", token, v, err)
	}
}

func holderToken(t *testing.T, l *Locker, key string) string {
	t.Helper()
	tok, err := l.rdb.HGet(context.Background(), l.prefix+key, "t").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return tok
}

// A waiter whose process died (its registration expired) is skipped: the
// release hands the key to the next live waiter.
func TestDeadWaiterSkipped(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	registerWaiter(t, l, "k", "DEAD", 100*time.Millisecond)
	registerWaiter(t, l, "k", "LIVE", 30*time.Second)
	if ws := waiters(t, l, "k"); len(ws) != 2 {
		t.Fatalf("waiters %+v, want DEAD then LIVE", ws)
	}
	waitForWaiters(t, l, "k", 1) // DEAD's registration has expired
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if tok := holderToken(t, l, "k"); tok != "LIVE" {
		t.Errorf("holder after release %q, want the live waiter", tok)
	}
	ks := keysFor(l.prefix, "k")
	withdrawScript.Run(ctx, l.rdb, ks.all(), "LIVE")
}

// A grant to a waiter that gave up at that very moment is taken back by
// the waiter's clean-up (withdrawScript), which hands the key on, so a
// cancelled Acquire never leaves a phantom hold.
func TestGrantToGoneWaiterTakenBack(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	registerWaiter(t, l, "k", "GONE", 10*time.Second)
	registerWaiter(t, l, "k", "NEXT", 10*time.Second)
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if tok := holderToken(t, l, "k"); tok != "GONE" {
		t.Fatalf("holder after release %q, want GONE (the longest waiter)", tok)
	}
	ks := keysFor(l.prefix, "k")
	if n, err := withdrawScript.Run(ctx, l.rdb, ks.all(), "GONE").Int(); err != nil || n != 1 {
		t.Fatalf("withdraw = %d, %v; want the grant taken back", n, err)
	}
	if tok := holderToken(t, l, "k"); tok != "NEXT" {
		t.Errorf("holder after the withdrawal %q, want NEXT", tok)
	}
	withdrawScript.Run(ctx, l.rdb, ks.all(), "NEXT")
}

// Every key of a lock hashes to the hold's slot, and keySlot is Redis's.
func TestKeysShareSlot(t *testing.T) {
	for key, want := range map[string]int{"foo": 12182, "bar": 5061, "123456789": 12739, "{user1000}.following": keySlot("user1000"), "a{}b": int(crc16("a{}b") % 16384)} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	for _, key := range []string{"k", SessionKey("t", "a", "c", "web"), "{tagged}x", "odd}{key"} {
		ks := keysFor("sesslock:", key)
		for _, other := range ks.all() {
			if keySlot(other) != keySlot(ks.hold) {
				t.Errorf("%q: %q in slot %d, the hold in %d", key, other, keySlot(other), keySlot(ks.hold))
			}
		}
	}
	for slot := range 16384 {
		if keySlot("{"+slotTag(slot)+"}") != slot {
			t.Fatalf("slotTag(%d) = %q hashes elsewhere", slot, slotTag(slot))
		}
	}
}

type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// Only a Redis that cannot be reached is unavailable: an error reply is
// an answer (issue 31, fault 4).
func TestUnavailableClassification(t *testing.T) {
	for err, want := range map[error]bool{
		replyErr("LOADING Redis is loading the dataset in memory"):                    false,
		replyErr("CLUSTERDOWN The cluster is down"):                                   false,
		replyErr("READONLY You can't write against a read only replica"):              false,
		replyErr("OOM command not allowed when used memory > 'maxmemory'."):           false,
		replyErr("BUSY Redis is busy running a script."):                              false,
		replyErr("ERR max number of clients reached"):                                 true,
		replyErr("WRONGTYPE Operation against a key holding the wrong kind of value"): false,
		&net.OpError{Op: "dial", Err: errors.New("refused")}:                          true,
		redis.ErrPoolTimeout: true,
		redis.ErrClosed:      true,
	} {
		if got := unavailable(fmt.Errorf("wrapped: %w", err)); got != want {
			t.Errorf("unavailable(%v) = %v, want %v", err, got, want)
		}
	}
}

// A key that holds something else (the seed's Python redis lock writes a
// string there) is an error of its own: neither "held" nor "unavailable".
func TestForeignValueIsNeitherHeldNorUnavailable(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	if err := l.rdb.Set(ctx, l.prefix+"k", "python-token", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := l.TryAcquire(ctx, "k")
	if err == nil || errors.Is(err, ErrLocked) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Acquire over a string = %v", err)
	}
}

// A hung Redis (it accepts connections and never answers) is unavailable
// once the wait is over, not "held": FailOpen opens on it. (The client has
// ContextTimeoutEnabled, as the package docs ask.)
func TestHungRedisIsUnavailable(t *testing.T) {
	srv := redistest.Private(t)
	l := lockerOn(t, redistest.ClientOf(t, srv), Options{Wait: 200 * time.Millisecond, FailOpen: true})
	ctx := context.Background()
	if err := l.Healthy(ctx); err != nil { // connect before the freeze
		t.Fatal(err)
	}
	if err := srv.Freeze(); err != nil {
		t.Fatal(err)
	}
	defer srv.Thaw()
	_, err := l.Acquire(ctx, "k")
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLocked) || errors.Is(err, ErrTimeout) {
		t.Errorf("Acquire on a hung Redis = %v, want ErrUnavailable only", err)
	}
	ran := false
	l.With(ctx, "k", func(context.Context) error { ran = true; return nil })
	if !ran || l.Stats().FailOpen != 1 {
		t.Errorf("With (fail open) on a hung Redis: ran %v, FailOpen %d", ran, l.Stats().FailOpen)
	}
}

// Close stops the listener, and a Locker used after Close listens again.
func TestCloseStopsListener(t *testing.T) {
	l := newLocker(t, Options{})
	ctx := context.Background()
	k, _ := l.Acquire(ctx, "k")
	got := make(chan error, 1)
	go func() {
		w, err := l.Acquire(ctx, "k", lockcore.Wait(30*time.Second))
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	waitForWaiters(t, l, "k", 1)
	k.Release(ctx)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	l.Close()
	l.mu.Lock()
	lis := l.lis
	l.mu.Unlock()
	if lis != nil {
		t.Fatal("listener still set after Close")
	}
	// A later wait starts it again.
	k, _ = l.Acquire(ctx, "k")
	go func() {
		w, err := l.Acquire(ctx, "k", lockcore.Wait(30*time.Second))
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	waitForWaiters(t, l, "k", 1)
	k.Release(ctx)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// The listener lingers after the last waiter, then stops by itself.
func TestListenerLingersThenStops(t *testing.T) {
	old := lingerFor
	lingerFor = 50 * time.Millisecond
	defer func() { lingerFor = old }()
	l := newLocker(t, Options{})
	<-l.listen()
	l.unlisten()
	pgtest.Eventually(t, "the unused listener stops", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.lis == nil
	})
}

// TryAcquire must not write into the spare capacity of the caller's
// options slice (it appended lockcore.Wait(0) there: issue 31, also noted).
func TestTryAcquireLeavesOptionsAlone(t *testing.T) {
	l := newLocker(t, Options{})
	opts := make([]lockcore.AcquireOption, 1, 2)
	opts[0] = lockcore.TTL(time.Minute)
	k, err := l.TryAcquire(context.Background(), "k", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(context.Background())
	if opts[:2][1] != nil {
		t.Error("TryAcquire wrote an option into the caller's slice")
	}
}
