package locktest_test

import (
	"bufio"
	"fmt"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// TestDeadHolderAdvisory: a process killed with SIGKILL while it holds an
// advisory lock frees it at once: the operating system closes its
// connection and the server ends the session, and the lock with it
// (lockcore's README, Loss: the server frees the lock when it notices the
// dead connection). The lease kinds have their own (lease's
// HolderKilledWhileHolding); a Redis hold's end is its TTL, in process or
// not (redislock's TestAutoReleaseAfterTTL).
func TestDeadHolderAdvisory(t *testing.T) {
	n := fmt.Sprintf("dead-holder-%d", time.Now().UnixNano())
	st := advisoryStore(t)
	cmd := st.Waiter(t, n) // the key is free: it takes it and holds it until killed
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	held := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		held <- sc.Scan() && sc.Text() == "held"
	}()
	select {
	case ok := <-held:
		if !ok {
			t.Fatal("the holder process ended without holding")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the holder process did not hold within 30s")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no release of any kind
		t.Fatal(err)
	}
	_ = cmd.Wait()
	start := time.Now()
	h, err := st.Locker(t).Acquire(ctxT(t), n, lockcore.Wait(3*time.Second))
	if err != nil {
		t.Fatalf("the killed holder's lock was still held %v later: %v", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("taken %v after the kill, fence %d", time.Since(start).Round(time.Millisecond), h.Fence())
	if err := h.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
