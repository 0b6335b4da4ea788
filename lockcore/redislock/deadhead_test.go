package redislock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// killSwitch is a go-redis hook that, once thrown, fails every command of
// its client: the process behind it died (no withdraw, no take-up, no
// renewal of its registration).
type killSwitch struct{ dead atomic.Bool }

var errKilled = errors.New("killed")

func (k *killSwitch) DialHook(next redis.DialHook) redis.DialHook { return next }
func (k *killSwitch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if k.dead.Load() {
			cmd.SetErr(errKilled)
			return errKilled
		}
		return next(ctx, cmd)
	}
}
func (k *killSwitch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if k.dead.Load() {
			return errKilled
		}
		return next(ctx, cmds)
	}
}

// Promise (hand-over): waiters that died while queued, with their
// registrations still alive and so at the head of the queue when the
// holder releases, keep the key no longer than their claim each; the live
// waiter queued behind them gets it within a bounded time, with a fence
// above the holder's and above every fence the release and its followers
// minted for the dead.
func TestDeadQueueHeadsDoNotStarveLiveWaiter(t *testing.T) {
	ctx := context.Background()
	const deadTTL = 150 * time.Millisecond // the dead waiters' TTL, so their claim
	holder := newLocker(t, Options{Owner: "holder"})
	old, err := holder.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}

	// Record every grant notice sent to the dead Lockers' channels.
	var mu sync.Mutex
	var deadFences []int64
	spy := redistest.Client(t).Subscribe(ctx)
	t.Cleanup(func() { spy.Close() })

	var kills []*killSwitch
	var cancels []context.CancelFunc
	var dones []chan struct{}
	for i := range 2 {
		ks := &killSwitch{}
		rdb := redis.NewClient(redistest.Client(t).Options())
		t.Cleanup(func() { rdb.Close() })
		rdb.AddHook(ks)
		dead := lockerOn(t, rdb, Options{Prefix: holder.prefix, Owner: "dead" + strconv.Itoa(i)})
		if err := spy.Subscribe(ctx, dead.channel); err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if l, err := dead.Acquire(dctx, "k", lockcore.Wait(10*time.Second), lockcore.TTL(deadTTL)); err == nil {
				t.Errorf("dead waiter %d got the lock before it died (fence %d)", i, l.Fence())
			}
		}()
		waitForWaiters(t, holder, "k", i+1)
		kills, cancels, dones = append(kills, ks), append(cancels, cancel), append(dones, done)
	}
	go func() {
		for m := range spy.Channel() {
			f := strings.Fields(m.Payload)
			if len(f) == 4 && f[0] == "g" {
				n, _ := strconv.ParseInt(f[2], 10, 64)
				mu.Lock()
				deadFences = append(deadFences, n)
				mu.Unlock()
			}
		}
	}()

	live := newLocker(t, Options{Prefix: holder.prefix, Owner: "live"})
	got := acquireLater(ctx, live, "k")
	waitForWaiters(t, holder, "k", 3)

	// Kill both queued waiters: their client fails every command from now
	// on, and their Acquire is abandoned (its withdraw fails too).
	for i := range kills {
		kills[i].dead.Store(true)
		cancels[i]()
		within(t, "the dead waiter's Acquire returns", dones[i], 5*time.Second)
	}
	// Their registrations outlive them (waiterTTL), ahead of the live one.
	waitForWaiters(t, holder, "k", 3)

	start := time.Now()
	if err := old.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Each dead head keeps the key at most its claim, and the live waiter
	// polls at least every maxPoll: two dead heads cost at most this, plus
	// roundTrips for the scripts on a loaded box (a head kept past its
	// claim would cost HandOverTTL, 2s, each).
	bound := 2*(deadTTL+maxPoll) + roundTrips
	lv := grantedWithin(t, got, start, bound, 2*time.Second)
	if err := lv.Err(); err != nil {
		t.Fatalf("the live waiter's lock is already lost: %v", err)
	}
	if lv.Fence() <= old.Fence() {
		t.Errorf("live fence %d not above the holder's %d", lv.Fence(), old.Fence())
	}
	// Give the spy a moment to read notices already sent.
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	fs := append([]int64(nil), deadFences...)
	mu.Unlock()
	t.Logf("fences: holder %d, granted to the dead %v, live %d", old.Fence(), fs, lv.Fence())
	if len(fs) == 0 {
		t.Error("no hand-over notice reached a dead waiter: the case did not hand the key to a dead queue head")
	}
	for _, f := range fs {
		if f <= old.Fence() {
			t.Errorf("a dead waiter's fence %d is not above the holder's %d", f, old.Fence())
		}
		if lv.Fence() <= f {
			t.Errorf("live fence %d not above a fence %d granted earlier to a dead waiter", lv.Fence(), f)
		}
	}
	// The live waiter really holds it, and nobody else does.
	if ok, err := holder.IsLocked(ctx, "k"); err != nil || !ok {
		t.Fatalf("IsLocked after the live grant: %v, %v", ok, err)
	}
	if l, err := holder.TryAcquire(ctx, "k"); err == nil {
		_ = l.Release(ctx)
		t.Fatal("another Locker got the key the live waiter holds")
	} else if !errors.Is(err, lockcore.ErrLocked) {
		t.Fatalf("TryAcquire while the live waiter holds: %v, want ErrLocked", err)
	}
	if err := lv.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
