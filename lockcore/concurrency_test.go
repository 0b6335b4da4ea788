package lockcore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// Concurrency test 1: two goroutines, same key, serialise; the second waits
// on the server until the first is done, then runs with fresh state.
func TestSameKeySerialises(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	mon := pgtest.Conn(t)
	key := freshAgent()

	var inside atomic.Int32
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	body := func(name string, gate <-chan struct{}) func(context.Context) error {
		return func(context.Context) error {
			if n := inside.Add(1); n != 1 {
				t.Errorf("%s: %d bodies inside at once", name, n)
			}
			note(name + " in")
			if gate != nil {
				<-gate
			}
			note(name + " out")
			inside.Add(-1)
			return nil
		}
	}
	gate := make(chan struct{})
	firstIn := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		errs <- s.With(context.Background(), key, func(ctx context.Context) error {
			close(firstIn)
			return body("first", gate)(ctx)
		})
	}()
	<-firstIn
	go func() { errs <- s.With(context.Background(), key, body("second", nil)) }()
	pgtest.Eventually(t, "the second acquirer waits on the server", func() bool {
		g, w := countGranted(rowsFor(t, mon, key))
		return g == 1 && w == 1
	})
	close(gate)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"first in", "first out", "second in", "second out"}
	if len(order) != 4 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] || order[3] != want[3] {
		t.Errorf("order %v, want %v", order, want)
	}
}

// Concurrency test 2: different agents proceed in parallel. Each body waits
// for the other to be inside: serialising would fail the test.
func TestDifferentKeysIndependent(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	a, b := freshAgent(), freshAgent()
	var wg sync.WaitGroup
	arrived := make(chan struct{}, 2)
	both := make(chan struct{})
	go func() {
		<-arrived
		<-arrived
		close(both)
	}()
	for _, k := range []lockcore.Key{a, b} {
		wg.Go(func() {
			err := s.With(context.Background(), k, func(context.Context) error {
				arrived <- struct{}{}
				select {
				case <-both:
					return nil
				case <-time.After(20 * time.Second):
					return errors.New("the other key's body never ran alongside")
				}
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// Concurrency test 3: a background worker's try skips an agent a hook holds.
func TestReaperSkipsAgentHeldByHook(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	key := freshAgent()
	hookIn := make(chan struct{})
	hookDone := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		errs <- s.With(context.Background(), key, func(context.Context) error {
			close(hookIn)
			<-hookDone
			return nil
		})
	}()
	<-hookIn
	acquired, err := s.TryWith(context.Background(), key, func(context.Context) error {
		t.Error("reaper ran while the hook held the agent")
		return nil
	})
	close(hookDone)
	if acquired || err != nil {
		t.Errorf("reaper TryWith = %v, %v; want false, nil", acquired, err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	// Next cycle: the agent is free and the reaper gets it.
	if acquired, err := s.TryWith(context.Background(), key, func(context.Context) error { return nil }); !acquired || err != nil {
		t.Errorf("next cycle TryWith = %v, %v; want true, nil", acquired, err)
	}
}

// Concurrency test 4: deferred stop vs session_end. session_end completes
// the command under the lock; the deferred stop sleeps first, then locks,
// re-reads the command, sees COMPLETE and skips.
func TestDeferredStopSeesComplete(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 4)
	work := pgtest.Pool(t, nil)
	ctx := context.Background()
	table := "cmd_" + time.Now().Format("150405000000")
	if _, err := work.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, state text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := work.Exec(ctx, "INSERT INTO "+table+" VALUES (1, 'PROCESSING')"); err != nil {
		t.Fatal(err)
	}
	key := freshAgent()
	endHolds := make(chan struct{})
	deferredWaiting := make(chan struct{})
	errs := make(chan error, 2)
	mon := pgtest.Conn(t)

	go func() { // session_end
		errs <- s.With(ctx, key, func(ctx context.Context) error {
			close(endHolds)
			<-deferredWaiting
			_, err := work.Exec(ctx, "UPDATE "+table+" SET state = 'COMPLETE' WHERE id = 1")
			return err
		})
	}()
	skipped := make(chan bool, 1)
	go func() { // deferred stop: its sleep is over, now it locks
		<-endHolds
		errs <- s.With(ctx, key, func(ctx context.Context) error {
			var state string
			if err := work.QueryRow(ctx, "SELECT state FROM "+table+" WHERE id = 1").Scan(&state); err != nil {
				return err
			}
			if state == "COMPLETE" {
				skipped <- true
				return nil
			}
			skipped <- false
			_, err := work.Exec(ctx, "UPDATE "+table+" SET state = 'COMPLETE' WHERE id = 1")
			return err
		})
	}()
	<-endHolds
	pgtest.Eventually(t, "the deferred stop waits for the lock", func() bool {
		_, w := countGranted(rowsFor(t, mon, key))
		return w == 1
	})
	close(deferredWaiting)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !<-skipped {
		t.Error("deferred stop did not see COMPLETE after session_end")
	}
}

// Concurrency test 5: pool exhaustion ends in timeouts, not a hang. The lock
// pool has 2 connections; 2 bodies hold them; 15 more attempts on other
// keys must each end in ErrTimeout.
func TestPoolExhaustionTimesOut(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 2)
	holding := make(chan struct{}, 2)
	free := make(chan struct{})
	var holders sync.WaitGroup
	for range 2 {
		holders.Go(func() {
			err := s.With(context.Background(), freshAgent(), func(context.Context) error {
				holding <- struct{}{}
				<-free
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	<-holding
	<-holding
	var wg sync.WaitGroup
	var timeouts atomic.Int32
	for range 15 {
		wg.Go(func() {
			err := s.With(context.Background(), freshAgent(), func(context.Context) error {
				t.Error("a body ran with the pool exhausted")
				return nil
			}, lockcore.Wait(200*time.Millisecond))
			if errors.Is(err, lockcore.ErrTimeout) {
				timeouts.Add(1)
			} else {
				t.Errorf("err = %v, want ErrTimeout", err)
			}
		})
	}
	wg.Wait()
	close(free)
	holders.Wait()
	if timeouts.Load() != 15 {
		t.Errorf("%d of 15 attempts timed out", timeouts.Load())
	}
	// TryWith also counts the connection wait against the timeout.
	s2, _ := newService(t, 1, lockcore.Wait(200*time.Millisecond))
	err := s2.With(context.Background(), freshAgent(), func(context.Context) error {
		acquired, err := s2.TryWith(context.Background(), freshAgent(), func(context.Context) error { return nil })
		if acquired || !errors.Is(err, lockcore.ErrTimeout) {
			t.Errorf("TryWith on an exhausted pool = %v, %v; want false, ErrTimeout", acquired, err)
		}
		return nil
	}, lockcore.Wait(30*time.Second)) // the outer lock's own connect may be slow on a loaded box
	if err != nil {
		t.Fatal(err)
	}
}

// Concurrency test 7: the reaper's per-agent lock-work-commit-release keeps
// at most 2 connections (1 lock + 1 work) checked out at any point.
func TestReaperPerIterationCommit(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 5)
	work := pgtest.Pool(t, nil)
	ctx := context.Background()
	table := "reap_" + time.Now().Format("150405000000")
	if _, err := work.Exec(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, reaped bool DEFAULT false)"); err != nil {
		t.Fatal(err)
	}
	if _, err := work.Exec(ctx, "INSERT INTO "+table+" (id) SELECT generate_series(1, 10)"); err != nil {
		t.Fatal(err)
	}
	peak := int32(0)
	for id := int32(1); id <= 10; id++ {
		acquired, err := s.TryWith(ctx, lockcore.Pair(registry.SpaceAgent, 500000+id), func(ctx context.Context) error {
			return pgx.BeginFunc(ctx, work, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "UPDATE "+table+" SET reaped = true WHERE id = $1", id); err != nil {
					return err
				}
				peak = max(peak, s.Pool().Stat().AcquiredConns()+work.Stat().AcquiredConns())
				return nil
			})
		})
		if !acquired || err != nil {
			t.Fatalf("agent %d: %v %v", id, acquired, err)
		}
		if n := s.Pool().Stat().AcquiredConns(); n != 0 {
			t.Fatalf("lock connection not returned before the next agent (%d out)", n)
		}
	}
	if peak > 2 {
		t.Errorf("peak connections in use = %d, want <= 2", peak)
	}
	var n int
	if err := work.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE reaped").Scan(&n); err != nil || n != 10 {
		t.Errorf("reaped %d (%v), want 10", n, err)
	}
}

// Many goroutines hammering a few keys: no two bodies on one key overlap,
// and nothing is left held or checked out.
func TestHammerNoOverlap(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, 10)
	keys := []lockcore.Key{freshAgent(), freshAgent(), freshAgent()}
	var inside [3]atomic.Int32
	var done [3]atomic.Int32
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 10 {
				k := (g + i) % 3
				err := s.With(context.Background(), keys[k], func(context.Context) error {
					if n := inside[k].Add(1); n != 1 {
						t.Errorf("%d bodies inside key %v", n, keys[k])
					}
					inside[k].Add(-1)
					done[k].Add(1)
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if total := done[0].Load() + done[1].Load() + done[2].Load(); total != 120 {
		t.Errorf("%d bodies ran, want 120", total)
	}
	if s.Held() != 0 || s.Pool().Stat().AcquiredConns() != 0 {
		t.Errorf("left held=%d checked out=%d", s.Held(), s.Pool().Stat().AcquiredConns())
	}
}
