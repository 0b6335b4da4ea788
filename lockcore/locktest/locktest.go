package locktest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/locktop/locktop/lockcore"
)

// Locker takes locks of one kind by name, each call as the kind's own
// does: the adapter of a Service, Locker or Manager.
type Locker interface {
	Acquire(ctx context.Context, name string, opts ...lockcore.AcquireOption) (lockcore.Hold, error)
	TryAcquire(ctx context.Context, name string) (lockcore.Hold, error)
	With(ctx context.Context, name string, fn func(context.Context) error, opts ...lockcore.AcquireOption) error
	TryWith(ctx context.Context, name string, fn func(context.Context) error) (bool, error)
}

// Lockers opens holders on a store: what every case needs of it.
type Lockers interface {
	// Locker opens another holder on the store, closed with the test.
	Locker(t *testing.T) Locker
}

// Store is one test's store of a kind: every Locker it opens shares it.
type Store interface {
	Lockers
	// Lose ends the hold of name from outside its holder: it kills the
	// backend, deletes the key or the row.
	Lose(t *testing.T, name string)
	// Waiter returns a process, not started, that waits for name on the
	// store (a minute or more, never giving up by itself) and, if it gets
	// it, holds it until it is killed.
	Waiter(t *testing.T, name string) *exec.Cmd
	// Waiting reports how many wait for name.
	Waiting(t *testing.T, name string) int
	// Elsewhere opens a holder on another store of the kind (another
	// database, Redis server, set of tables), closed with the test: the
	// same name there is another lock.
	Elsewhere(t *testing.T) Locker
}

// Describer is a store that can say who holds a lock: what the suite
// prints when a case leaves a lock held, so that a failure seen once (in
// CI) names the holder, when it was granted and until when, and the
// process it belongs to.
type Describer interface {
	// Describe returns the holders of name, one a line, or why it cannot.
	Describe(t *testing.T, name string) string
}

// CrashStore is one test's store of a kind that the test may crash.
type CrashStore interface {
	Lockers
	// Checkpoint makes what the store holds durable as of now, so that a
	// crash loses only what comes after it (PostgreSQL's CHECKPOINT); it
	// does nothing where there is no such step.
	Checkpoint(t *testing.T)
	// Crash ends the store as a crash would and brings it back: a server
	// stopped with no shutdown of any kind and started again, or, for a
	// store inside its users' processes, one of them killed with SIGKILL
	// while it takes name. It returns the fences of the grants of name it
	// saw the crashed process make (none for a server), which every later
	// grant must exceed too. After it, name is free, or a stale hold that
	// an acquire takes over.
	Crash(t *testing.T, name string) (fences []int64)
}

// Kind is one kind of lock under test.
type Kind struct {
	Name string
	// Open gives a test a store of its own.
	Open func(t *testing.T) Store
	// DeadWaiterBound is the longest time a waiter that died while queued
	// may keep a released lock from a live waiter, as the kind's
	// documentation states it (0: not at all).
	DeadWaiterBound time.Duration
	// Crash gives a test a store of its own that it may crash: a server of
	// its own, not one other tests share.
	Crash func(t *testing.T) CrashStore
	// StoresOrdered says the kind takes one name on two stores in an
	// order of its stores (lease: seed 004's global order, then the
	// tables' name): of the two nestings, the one against that order is
	// refused at once (lockcore.ErrReentrant), not waited for.
	StoresOrdered bool
}

// Run runs the suite on kind, each case a subtest.
func Run(t *testing.T, kind Kind) {
	for _, c := range cases(kind) {
		t.Run(c.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Run("case", func(t *testing.T) {
				st, names := c.run(t)
				// Nothing left held: a fresh holder takes every lock used.
				fresh := st.Locker(t)
				for _, n := range names {
					h, err := fresh.TryAcquire(ctxT(t), n)
					if err != nil {
						t.Errorf("after the case, %s is still held: %v%s", n, err, describe(t, st, n))
						continue
					}
					if err := h.Release(ctxT(t)); err != nil {
						t.Errorf("release %s: %v", n, err)
					}
				}
			})
			if t.Failed() {
				return
			}
			// The store and holders are closed (the subtest's cleanups):
			// nothing of theirs may still run.
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := goleak.Find(ignore)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("goroutines left behind: %v", err)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// describe is what st says of the holders of n, on lines of their own,
// if it can say.
func describe(t *testing.T, st Lockers, n string) string {
	d, ok := st.(Describer)
	if !ok {
		return ""
	}
	return "\nheld by:\n" + d.Describe(t, n)
}

// testCase opens the store it needs and runs on it, returning the store
// and the names of the locks it used.
type testCase struct {
	name string
	run  func(t *testing.T) (Lockers, []string)
}

// cases are the suite's cases for kind.
func cases(kind Kind) []testCase {
	on := func(c func(*testing.T, Store) []string) func(*testing.T) (Lockers, []string) {
		return func(t *testing.T) (Lockers, []string) {
			st := kind.Open(t)
			return st, c(t, st)
		}
	}
	return []testCase{
		{"exclusion", on(exclusion)},
		{"try", on(try)},
		{"wait and timeout", on(waitTimeout)},
		{"cancellation", on(cancellation)},
		{"loss", on(loss)},
		{"fences", on(fences)},
		{"reentrancy", on(reentrancy)},
		{"another store", on(func(t *testing.T, st Store) []string { return elsewhere(t, st, kind.StoresOrdered) })},
		{"dead waiter", on(func(t *testing.T, st Store) []string { return deadWaiter(t, st, kind.DeadWaiterBound) })},
		{"fences across a crash", func(t *testing.T) (Lockers, []string) {
			if kind.Crash == nil {
				t.Fatalf("kind %s does not say how its store crashes (Kind.Crash)", kind.Name)
			}
			st := kind.Crash(t)
			return st, crashFences(t, st)
		}},
	}
}

var seq atomic.Int64

// name returns a lock name of the test's own.
func name(what string) string { return fmt.Sprintf("locktest-%s-%d", what, seq.Add(1)) }

// ctxT is a context for one step, ended with the test.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exclusion: 3 holders x 2 goroutines x 5 sections on one lock never
// overlap, and each section's fence is above the one before.
func exclusion(t *testing.T, st Store) []string {
	n := name("excl")
	var (
		in    atomic.Int32
		mu    sync.Mutex
		last  int64
		order []int64
		wg    sync.WaitGroup
	)
	for range 3 {
		l := st.Locker(t)
		for range 2 {
			wg.Go(func() {
				for range 5 {
					err := l.With(ctxT(t), n, func(ctx context.Context) error {
						if in.Add(1) != 1 {
							t.Error("two holders in the section at once")
						}
						f := fenceIn(t, ctx)
						mu.Lock()
						if f <= last {
							t.Errorf("fence %d after %d: not strictly increasing", f, last)
						}
						last = f
						order = append(order, f)
						mu.Unlock()
						time.Sleep(time.Millisecond) // a little work, so that others queue
						in.Add(-1)
						return nil
					}, lockcore.Wait(50*time.Second))
					if err != nil {
						t.Errorf("With: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	if len(order) != 30 {
		t.Errorf("%d sections ran, want 30", len(order))
	}
	return []string{n}
}

// fenceIn is the fence of the hold a With body's ctx carries: the newest
// lock of its held set.
func fenceIn(t *testing.T, ctx context.Context) int64 {
	e := lockcore.Held(ctx)
	if e == nil || e.Hold == nil {
		t.Fatal("the body's context carries no hold")
		return 0
	}
	return e.Hold.Fence()
}

// try: a held lock is ErrLocked to a try, and TryWith does not run.
func try(t *testing.T, st Store) []string {
	n := name("try")
	a, b := st.Locker(t), st.Locker(t)
	h, err := a.Acquire(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.TryAcquire(ctxT(t), n)
	if got != nil || !errors.Is(err, lockcore.ErrLocked) {
		t.Errorf("TryAcquire of a held lock = %v, %v; want no lock and ErrLocked", got, err)
	}
	if errors.Is(err, lockcore.ErrTimeout) {
		t.Errorf("a try that found the lock held matches ErrTimeout too: %v", err)
	}
	ran := false
	ok, err := b.TryWith(ctxT(t), n, func(context.Context) error { ran = true; return nil })
	if ok || err != nil || ran {
		t.Errorf("TryWith of a held lock = %v, %v (ran %v); want false, nil, not run", ok, err, ran)
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ok, err = b.TryWith(ctxT(t), n, func(context.Context) error { ran = true; return nil })
	if !ok || err != nil || !ran {
		t.Errorf("TryWith of a free lock = %v, %v (ran %v); want true, nil, run", ok, err, ran)
	}
	return []string{n}
}

// waitTimeout: a wait ends in ErrTimeout while the lock stays held, and in
// a grant when it is released in time.
func waitTimeout(t *testing.T, st Store) []string {
	n := name("wait")
	a, b := st.Locker(t), st.Locker(t)
	h, err := a.Acquire(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Acquire(ctxT(t), n, lockcore.Wait(300*time.Millisecond))
	if got != nil || !errors.Is(err, lockcore.ErrTimeout) {
		t.Fatalf("Acquire(Wait 300ms) of a held lock = %v, %v; want no lock and ErrTimeout", got, err)
	}
	done := make(chan error, 1)
	go func() {
		done <- b.With(ctxT(t), n, func(context.Context) error { return nil }, lockcore.Wait(50*time.Second))
	}()
	time.Sleep(50 * time.Millisecond) // let it queue (either way it must get the lock)
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("a waiter did not get the released lock: %v", err)
	}
	return []string{n}
}

// cancellation: cancelling a waiting Acquire ends it with the context's
// error at once.
func cancellation(t *testing.T, st Store) []string {
	n := name("cancel")
	a, b := st.Locker(t), st.Locker(t)
	h, err := a.Acquire(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		got, err := b.Acquire(ctx, n, lockcore.Wait(time.Hour))
		if got != nil {
			_ = got.Release(ctxT(t))
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Acquire = %v, want context.Canceled", err)
		}
		if errors.Is(err, lockcore.ErrTimeout) {
			t.Errorf("a cancelled Acquire matches ErrTimeout: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a cancelled Acquire did not return")
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return []string{n}
}

// loss: a hold ended from outside cancels the body's context with ErrLost,
// and With returns it.
func loss(t *testing.T, st Store) []string {
	n := name("loss")
	a := st.Locker(t)
	err := a.With(ctxT(t), n, func(ctx context.Context) error {
		st.Lose(t, n)
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the body's context was not cancelled within 30s of the loss")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, lockcore.ErrLost) {
			t.Errorf("the body's context ended with cause %v, want ErrLost", cause)
		}
		return nil
	})
	if !errors.Is(err, lockcore.ErrLost) {
		t.Errorf("With after a loss = %v, want ErrLost", err)
	}
	return []string{n}
}

// fences: each grant's fence is above the last, also for another holder
// granted the lock after the first lost it; the loser's Release says
// ErrLost.
func fences(t *testing.T, st Store) []string {
	n := name("fence")
	a, b := st.Locker(t), st.Locker(t)
	var last int64
	next := func(who string, h lockcore.Hold) {
		t.Helper()
		if f := h.Fence(); f <= last {
			t.Errorf("%s: fence %d after %d: not strictly increasing", who, f, last)
		} else {
			last = f
		}
	}
	for i, l := range []Locker{a, b, a} {
		h, err := l.Acquire(ctxT(t), n)
		if err != nil {
			t.Fatal(err)
		}
		next(fmt.Sprintf("grant %d", i+1), h)
		if err := h.Release(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	// A loses its hold; B is granted the lock meanwhile (a steal).
	ha, err := a.Acquire(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	next("before the loss", ha)
	st.Lose(t, n)
	hb, err := b.Acquire(ctxT(t), n, lockcore.Wait(50*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	next("after the loss", hb)
	if err := hb.Err(); err != nil {
		t.Errorf("the new holder's hold: %v", err)
	}
	if err := hb.Release(ctxT(t)); err != nil {
		t.Errorf("the new holder's Release: %v", err)
	}
	select {
	case <-ha.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the lost hold's Done did not close within 30s")
	}
	if err := ha.Err(); !errors.Is(err, lockcore.ErrLost) {
		t.Errorf("Err of the lost hold = %v, want ErrLost", err)
	}
	if err := ha.Release(ctxT(t)); !errors.Is(err, lockcore.ErrLost) {
		t.Errorf("Release after the loss = %v, want ErrLost", err)
	}
	return []string{n}
}

// elsewhere: the same name on two stores is two locks (lockcore.Entry): a
// context that holds it on one takes it on the other as any other lock, in
// either nesting, and each store still refuses its own again.
func elsewhere(t *testing.T, st Store, ordered bool) []string {
	n := name("apart")
	here, there := st.Locker(t), st.Elsewhere(t)
	refused := 0
	for _, p := range [][2]Locker{{here, there}, {there, here}} {
		// A graph of its own: nesting both ways is an inversion, the
		// order check's to report (lockcore's TestOrderPerStore).
		ctx := lockcore.WithOrder(ctxT(t), lockcore.NewOrderGraph())
		start := time.Now()
		err := p[0].With(ctx, n, func(ctx context.Context) error {
			return p[1].With(ctx, n, func(ctx context.Context) error {
				for _, l := range p {
					if h, err := l.TryAcquire(ctx, n); h != nil || !errors.Is(err, lockcore.ErrReentrant) {
						t.Errorf("TryAcquire of a lock the context holds on that store = %v, %v; want ErrReentrant", h, err)
					}
				}
				return nil
			})
		})
		if ordered && errors.Is(err, lockcore.ErrReentrant) && time.Since(start) < 10*time.Second {
			refused++ // against the kind's order of its stores
			continue
		}
		if err != nil {
			t.Errorf("%s on a second store while the first holds it: %v", n, err)
		}
	}
	if ordered && refused != 1 {
		t.Errorf("%d of the two nestings refused at once, want 1: the kind orders its stores", refused)
	}
	return []string{n}
}

// reentrancy: a lock the context holds is refused at once, not waited for.
func reentrancy(t *testing.T, st Store) []string {
	n := name("reent")
	a := st.Locker(t)
	h, err := a.Acquire(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	if h.Owner() == "" {
		t.Error("a hold with no owner")
	}
	inner, cancel := context.WithTimeout(h.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	got, err := a.Acquire(inner, n, lockcore.Wait(20*time.Second))
	if got != nil || !errors.Is(err, lockcore.ErrReentrant) {
		t.Errorf("Acquire of a lock the context holds = %v, %v; want no lock and ErrReentrant", got, err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the reentrant Acquire waited %v before it was refused", time.Since(start))
	}
	got, err = a.TryAcquire(inner, n)
	if got != nil || !errors.Is(err, lockcore.ErrReentrant) {
		t.Errorf("TryAcquire of a lock the context holds = %v, %v; want ErrReentrant", got, err)
	}
	ran := false
	if ok, err := a.TryWith(inner, n, func(context.Context) error { ran = true; return nil }); ok || err != nil || ran {
		t.Errorf("TryWith of a lock the context holds = %v, %v (ran %v); want false, nil", ok, err, ran)
	}
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return []string{n}
}
