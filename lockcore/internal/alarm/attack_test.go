package alarm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Attack tests (bp8): a context of Waits.With set against what
// context.WithDeadline's does in the same situation.

// TestAttackParentCancelledWithDeadlineCause: a caller's context cancelled
// with the cause context.DeadlineExceeded (not by a deadline of its own)
// ends a WithDeadline context with Err Canceled: the wait's deadline did
// not end it. A Waits context must say the same, or pgconn (which reads
// ctx.Err to tell a timeout from a cancellation) and a caller told
// "timed out" are misled.
func TestAttackParentCancelledWithDeadlineCause(t *testing.T) {
	var ws Waits
	far := time.Now().Add(time.Hour)
	parent, cancel := context.WithCancelCause(context.Background())
	ref, refCancel := context.WithDeadline(parent, far)
	defer refCancel()
	c, end := ws.With(parent, far)
	defer end()
	cancel(context.DeadlineExceeded)
	<-c.Done()
	if got, want := c.Err(), ref.Err(); got != want {
		t.Errorf("Err %v, context.WithDeadline's %v", got, want)
	}
	if got, want := context.Cause(c), context.Cause(ref); got != want {
		t.Errorf("Cause %v, context.WithDeadline's %v", got, want)
	}
}

// TestAttackDerivedContexts: contexts derived from a Waits context
// (WithCancel, WithTimeout longer than the wait, AfterFunc) end when the
// wait's deadline passes, with the cause DeadlineExceeded, as those
// derived from a WithDeadline context do. Their Err differs: Canceled
// where WithDeadline's children report DeadlineExceeded (the runtime
// propagates its cancel context's err, which only a timer of the context
// package sets to DeadlineExceeded). The Context's doc says so; no caller
// in the lock family tells a timeout by a derived context's Err (lease
// and redislock ask the wait context itself or the caller's).
func TestAttackDerivedContexts(t *testing.T) {
	var ws Waits
	deadline := time.Now().Add(100 * time.Millisecond)
	wctx, end := ws.With(context.Background(), deadline)
	defer end()
	ref, refCancel := context.WithDeadline(context.Background(), deadline)
	defer refCancel()
	derive := func(ctx context.Context) (children []context.Context, fired chan struct{}) {
		c1, cancel1 := context.WithCancel(ctx)
		t.Cleanup(cancel1)
		c2, cancel2 := context.WithTimeout(ctx, time.Hour)
		t.Cleanup(cancel2)
		c3, cancel3 := context.WithCancelCause(ctx)
		t.Cleanup(func() { cancel3(nil) })
		fired = make(chan struct{})
		context.AfterFunc(ctx, func() { close(fired) })
		return []context.Context{c1, c2, c3}, fired
	}
	ours, oursFired := derive(wctx)
	theirs, theirsFired := derive(ref)
	for i, c := range append(ours, theirs...) {
		select {
		case <-c.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("derived context %d still open 30s after a 100ms deadline", i)
		}
	}
	<-oursFired
	<-theirsFired
	if wctx.Err() != context.DeadlineExceeded {
		t.Errorf("the wait context's Err %v, want DeadlineExceeded", wctx.Err())
	}
	for i := range ours {
		if got, want := context.Cause(ours[i]), context.Cause(theirs[i]); got != want {
			t.Errorf("derived %d: Cause %v, WithDeadline's child's %v", i, got, want)
		}
		if ours[i].Err() == nil {
			t.Errorf("derived %d: Err nil once done", i)
		}
		if d, ok := ours[i].Deadline(); !ok || !d.Equal(deadline) {
			t.Errorf("derived %d: Deadline %v %v, want the wait's %v", i, d, ok, deadline)
		}
	}
}

// TestAttackManyWaits: thousands of concurrent contexts, waits mixed (a
// deadline passed already, short ones the alarm ends, long ones their end
// ends, each asked in a random order of deadlines): each ends as
// context.WithDeadline's would (DeadlineExceeded not before its deadline,
// Canceled when ended first), and none stays in the Waits once ended.
func TestAttackManyWaits(t *testing.T) {
	var ws Waits
	const n = 4000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 4 {
			case 0: // already over
				c, end := ws.With(context.Background(), time.Now().Add(-time.Millisecond))
				defer end()
				if c.Err() != context.DeadlineExceeded {
					errs <- fmt.Errorf("%d: a passed deadline's Err %v", i, c.Err())
				}
			case 1, 2: // ended by the alarm, deadlines 1..200ms, not in order
				d := time.Now().Add(time.Duration(1+(i*7919)%200) * time.Millisecond)
				c, end := ws.With(context.Background(), d)
				defer end()
				select {
				case <-c.Done():
				case <-time.After(60 * time.Second):
					errs <- fmt.Errorf("%d: open 60s after its deadline", i)
					return
				}
				if early := time.Until(d); early > 0 {
					errs <- fmt.Errorf("%d: ended %v before its deadline", i, early)
				}
				if c.Err() != context.DeadlineExceeded || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
					errs <- fmt.Errorf("%d: Err %v Cause %v", i, c.Err(), context.Cause(c))
				}
			case 3: // ended by its end, long before its deadline
				c, end := ws.With(context.Background(), time.Now().Add(time.Hour))
				time.Sleep(time.Duration(i%50) * time.Millisecond) // spread the ends over the alarm's fires
				end()
				if c.Err() != context.Canceled {
					errs <- fmt.Errorf("%d: Err %v after end, want Canceled", i, c.Err())
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	bad := 0
	for err := range errs {
		if bad++; bad <= 10 {
			t.Error(err)
		}
	}
	if bad > 10 {
		t.Errorf("... %d failures in all", bad)
	}
	if l := ws.Len(); l != 0 {
		t.Errorf("%d contexts left in the Waits after all %d ended", l, n)
	}
	t.Logf("%d waits in %v", n, time.Since(start))
}

// TestAttackAlarmArmDuringFire: Arm called while the alarm fires, over
// and over, for times near now: every time asked is fired at or after,
// none is lost (Fire runs no later than each time once it is due).
func TestAttackAlarmArmDuringFire(t *testing.T) {
	var (
		mu      sync.Mutex
		pending []time.Time // asked, not yet seen by a fire at or after it
		a       Alarm
	)
	a.Fire = func() {
		now := time.Now()
		mu.Lock()
		var next time.Time
		kept := pending[:0]
		for _, p := range pending {
			if now.Before(p) {
				kept = append(kept, p)
				if next.IsZero() || p.Before(next) {
					next = p
				}
			}
		}
		pending = kept
		mu.Unlock()
		if !next.IsZero() {
			a.Arm(next)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				at := time.Now().Add(time.Duration((g*31+i*17)%5000) * time.Microsecond)
				mu.Lock()
				pending = append(pending, at)
				mu.Unlock()
				a.Arm(at)
				if i%10 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		left := len(pending)
		mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d times asked of the alarm never fired, 60s after the last (≤5ms ahead)", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.Stop()
}

// TestAttackLenBeforeFirstWith: Len, which tests poll while an acquire
// gets under way, may run before the Waits' first With: no data race.
func TestAttackLenBeforeFirstWith(t *testing.T) {
	var ws Waits
	_ = ws.Len()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, end := ws.With(context.Background(), time.Now().Add(time.Hour))
		end()
	}()
	_ = ws.Len()
	<-done
}

// TestAttackEndRacesDeadline: end called as the deadline passes, over and
// over: whichever of the two ends the context, its Err, once set, never
// changes, and Err and Cause agree (DeadlineExceeded with the cause
// DeadlineExceeded, Canceled with Canceled), as context.WithDeadline's
// do.
func TestAttackEndRacesDeadline(t *testing.T) {
	var ws Waits
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[error]int{}
	for i := range 2000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := time.Now().Add(time.Duration(200+i%300) * time.Microsecond)
			c, end := ws.With(context.Background(), d)
			for time.Now().Before(d) {
				runtime.Gosched()
			}
			end()
			first := c.Err()
			for range 3 {
				runtime.Gosched()
				if err := c.Err(); err != first {
					t.Errorf("%d: Err %v, then %v", i, first, err)
					return
				}
			}
			if cause := context.Cause(c); cause != first {
				t.Errorf("%d: Err %v, Cause %v", i, first, cause)
			}
			mu.Lock()
			counts[first]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("ended: %v", counts)
	if n := ws.Len(); n != 0 {
		t.Errorf("%d left", n)
	}
}
