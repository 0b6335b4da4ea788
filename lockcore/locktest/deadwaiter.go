package locktest

import (
	"os"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// deadWaiterSlack is added to a kind's dead-waiter bound before the live
// waiter gives up: time for it to poll and be answered on a loaded 2-core
// machine. A dead waiter kept for a lock's whole TTL or lease (tens of
// seconds) still fails the case.
const deadWaiterSlack = 3 * time.Second

// deadWaiter: a waiter process killed with SIGKILL while queued never keeps
// the lock past the kind's bound. The holder releases right after the
// kill, so the dead waiter is first in line when the lock is handed on.
func deadWaiter(t *testing.T, st Store, bound time.Duration) []string {
	n := name("dead")
	a, b := st.Locker(t), st.Locker(t)
	h, err := a.Acquire(ctxT(t), n)
	if err != nil {
		t.Fatal(err)
	}
	cmd := st.Waiter(t, n)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the waiter process: %v", err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for st.Waiting(t, n) != 1 {
		if h.Err() != nil {
			t.Fatalf("the holder lost its lock before the waiter queued: %v", h.Err())
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter process did not queue within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no clean-up of any kind
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	// Its pid names it among the holders the suite lists if the lock is
	// left held (an owner id carries its process's pid).
	t.Logf("the waiter process, pid %d, was killed", cmd.Process.Pid)
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatalf("release: %v", err)
	}
	start := time.Now()
	got, err := b.Acquire(ctxT(t), n, lockcore.Wait(bound+deadWaiterSlack))
	if err != nil {
		t.Fatalf("a dead waiter kept the lock for over %v (the bound is %v): %v",
			time.Since(start).Round(time.Millisecond), bound, err)
	}
	t.Logf("a live waiter (owner %s) got the lock %v after the release (the bound is %v), fence %d",
		got.Owner(), time.Since(start).Round(time.Millisecond), bound, got.Fence())
	if err := got.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return []string{n}
}
