package lockcore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// queued waits until s has n goroutines waiting for a hand-off.
func queued(t *testing.T, s *lockcore.Service, n int) {
	t.Helper()
	for end := time.Now().Add(guard); s.HandOffWaiting() != n; {
		if time.Now().After(end) {
			t.Fatalf("%d goroutines waiting for a hand-off, want %d", s.HandOffWaiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// acquired is the outcome of an Acquire run in a goroutine.
type acquired struct {
	l   *lockcore.Lock
	err error
}

func acquireAsync(s *lockcore.Service, ctx context.Context, key lockcore.Key, timeout time.Duration) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := s.Acquire(ctx, key, lockcore.Wait(timeout))
		ch <- acquired{l, err}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(guard):
		t.Fatalf("acquire did not return within %s", guard)
		return acquired{}
	}
}

// A goroutine waiting for a key another goroutine of the same Service
// holds gets the holder's session, still holding the lock, when it is
// released: same backend, no unlock sent, a higher fence, the key in its
// context (a nested acquire is refused as before), and the old Lock
// released.
func TestHandOffPassesSession(t *testing.T) {
	t.Parallel()
	unlocks := &unlockCounter{}
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 2; c.ConnConfig.Tracer = unlocks })
	// An hour's hold: with the default 10ms, a loaded machine takes longer
	// between the grant and the release, and the lock goes back to the
	// server instead (seen at load 17).
	s := lockcore.New(pool, lockcore.HandOff(0, time.Hour))
	ctx := context.Background()
	key := freshAgent()

	first, err := s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	next := acquireAsync(s, ctx, key, 0)
	queued(t, s, 1)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := receive(t, next)
	if got.err != nil {
		t.Fatal(got.err)
	}
	second := got.l
	if second.PID() != first.PID() {
		t.Errorf("handed lock on backend %d, want the holder's %d", second.PID(), first.PID())
	}
	if second.Fence() <= first.Fence() {
		t.Errorf("fence %d after %d: not increasing", second.Fence(), first.Fence())
	}
	if n := unlocks.n.Load(); n != 0 {
		t.Errorf("%d unlocks sent by the hand-off, want 0", n)
	}
	if s.HandOffs() != 1 || s.Held() != 1 {
		t.Errorf("HandOffs %d, Held %d; want 1, 1", s.HandOffs(), s.Held())
	}
	if !errors.Is(first.Err(), lockcore.ErrReleased) || second.Err() != nil {
		t.Errorf("first.Err %v, second.Err %v", first.Err(), second.Err())
	}
	if f, ok := lockcore.FenceOf(second.Context(), key); !ok || f != second.Fence() {
		t.Errorf("FenceOf = %d, %v; want %d", f, ok, second.Fence())
	}
	if _, err := s.Acquire(second.Context(), key, lockcore.Wait(time.Second)); !errors.Is(err, lockcore.ErrReentrant) {
		t.Errorf("nested acquire in the handed lock's context: %v, want ErrReentrant", err)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := unlocks.n.Load(); n != 1 {
		t.Errorf("%d unlocks after the last release, want 1", n)
	}
	release := holdElsewhere(t, key) // the server has it free again
	release()
}

// Fences stay strictly increasing in the order of the critical sections,
// across local hand-offs and grants by the server to another Service
// (another session) taking the same key, and no two sections overlap.
func TestHandOffFencesIncrease(t *testing.T) {
	t.Parallel()
	local, _ := newService(t, 8, lockcore.HandOff(5, time.Hour))
	other, _ := newService(t, 2)
	key := freshAgent()
	var mu sync.Mutex
	var fences []int64
	var inside atomic.Int32
	body := func(ctx context.Context) error {
		if inside.Add(1) != 1 {
			t.Error("two critical sections at once")
		}
		f, _ := lockcore.FenceOf(ctx, key)
		mu.Lock()
		fences = append(fences, f)
		mu.Unlock()
		inside.Add(-1)
		return nil
	}
	var wg sync.WaitGroup
	for i := range 10 {
		s := local
		if i >= 8 {
			s = other
		}
		wg.Go(func() {
			for range 40 {
				if err := s.With(context.Background(), key, body); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Fatalf("fence %d at section %d after %d", fences[i], i, fences[i-1])
		}
	}
	if local.HandOffs() == 0 {
		t.Error("no local hand-off among 8 goroutines on one key")
	}
	t.Logf("%d sections, %d by local hand-off", len(fences), local.HandOffs())
}

// A waiter of another session is served while the goroutines of one
// Service keep passing a key among themselves: the hand-off gives the key
// back to the server after its bound. Without a bound (the control), that
// waiter starves until its timeout.
func TestHandOffFairnessBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opt    lockcore.Option
		served bool
	}{
		{"time bound", lockcore.HandOff(1_000_000, 20*time.Millisecond), true},
		{"count bound", lockcore.HandOff(16, time.Hour), true},
		{"unbounded (control)", lockcore.HandOff(1_000_000, time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, _ := newService(t, 4, tc.opt)
			other, _ := newService(t, 1)
			key := freshAgent()
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer wg.Wait()
			defer stop()
			for range 4 {
				wg.Go(func() {
					for ctx.Err() == nil {
						err := s.With(ctx, key, func(context.Context) error { time.Sleep(100 * time.Microsecond); return nil })
						if err != nil && ctx.Err() == nil {
							t.Error(err)
							return
						}
					}
				})
			}
			// The waiter joins once the Service's goroutines pass the key
			// among themselves.
			for end := time.Now().Add(guard); s.HandOffs() < 10; {
				if time.Now().After(end) {
					t.Fatal("no local hand-offs")
				}
				time.Sleep(time.Millisecond)
			}
			const timeout = 3 * time.Second
			start := time.Now()
			l, err := other.Acquire(context.Background(), key, lockcore.Wait(timeout))
			waited := time.Since(start)
			hand := s.HandOffs()
			if tc.served {
				if err != nil {
					t.Fatalf("the other session's waiter: %v (after %s, %d hand-offs)", err, waited, hand)
				}
				t.Logf("the other session's waiter served after %s (%d local hand-offs so far)", waited, hand)
				if err := l.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, lockcore.ErrTimeout) {
				t.Fatalf("control: the other session's waiter got %v, want ErrTimeout (starved)", err)
			}
		})
	}
}

// The holder's session ends while a goroutine waits for the hand-off: the
// waiter is not handed a dead session as if it held the lock. Either the
// loss is seen first and the waiter takes the key on the server (another
// backend, a higher fence), or it is handed the session and learns of the
// loss as any holder does (Done, ErrLost).
func TestHandOffLoss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		opts     []lockcore.Option
		seenLost bool // wait for the holder to see its loss before releasing
	}{
		{"loss seen before release", nil, true},
		{"release at once, fences to draw", nil, false},
		{"release at once, no fencing", []lockcore.Option{lockcore.NoFencing()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, rec := newService(t, 3, append([]lockcore.Option{lockcore.HandOff(0, 0)}, tc.opts...)...)
			mon := pgtest.Conn(t)
			ctx := context.Background()
			key := freshAgent()
			first, err := s.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			next := acquireAsync(s, ctx, key, 10*time.Second)
			queued(t, s, 1)
			terminate(t, mon, first.PID())
			if tc.seenLost {
				waitDone(t, first, "holder after terminate")
			}
			if err := first.Release(ctx); tc.seenLost && !errors.Is(err, lockcore.ErrLost) {
				t.Fatalf("release after the loss: %v, want ErrLost", err)
			}
			got := receive(t, next)
			if got.err != nil {
				t.Fatalf("waiter: %v", got.err)
			}
			second := got.l
			defer second.Release(ctx)
			if second.PID() == first.PID() {
				// Handed the dead session: its loss must be seen as any other.
				waitDone(t, second, "the lock handed a dead session")
				if !errors.Is(second.Err(), lockcore.ErrLost) {
					t.Fatalf("handed a dead session, Err %v, want ErrLost", second.Err())
				}
				return
			}
			if !backendAlive(t, mon, second.PID()) || second.Err() != nil {
				t.Fatalf("waiter's lock on backend %d: Err %v", second.PID(), second.Err())
			}
			if tc.opts == nil && second.Fence() <= first.Fence() {
				t.Errorf("fence %d after the lost %d", second.Fence(), first.Fence())
			}
			rows := rowsFor(t, mon, key)
			if g, _ := countGranted(rows); g != 1 {
				t.Errorf("%d sessions hold the key on the server, want 1", g)
			}
			if rec.count(lockcore.EventLost) < 1 {
				t.Error("no EventLost for the holder")
			}
		})
	}
}

// A waiter whose context ends leaves the queue; the holder's release then
// unlocks on the server, and the key is free for anyone.
func TestHandOffWaiterGivesUp(t *testing.T) {
	t.Parallel()
	s, rec := newService(t, 2, lockcore.HandOff(0, 0))
	ctx := context.Background()
	key := freshAgent()
	first, err := s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	next := acquireAsync(s, wctx, key, 0)
	queued(t, s, 1)
	cancel()
	if got := receive(t, next); !errors.Is(got.err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", got.err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s.HandOffs() != 0 || s.HandOffWaiting() != 0 {
		t.Errorf("HandOffs %d, waiting %d after the waiter gave up", s.HandOffs(), s.HandOffWaiting())
	}
	if rec.count(lockcore.EventCanceled) != 1 {
		t.Errorf("%d EventCanceled, want 1", rec.count(lockcore.EventCanceled))
	}
	release := holdElsewhere(t, key)
	release()
	// A timed-out waiter too.
	first, err = s.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, key, lockcore.Wait(50*time.Millisecond)); !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("waiter past its timeout: %v, want ErrTimeout", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s.HandOffWaiting() != 0 || s.Held() != 0 {
		t.Errorf("waiting %d, held %d at the end", s.HandOffWaiting(), s.Held())
	}
}
