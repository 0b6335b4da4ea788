//go:build attack

package redislock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// The child process of the kill tests: the test binary run again with
// BP16_CHILD set, before TestMain starts a server of its own. It takes (or
// queues for) one key on the parent's Redis, says so on stdout, and then
// blocks until it is SIGKILLed: nothing of it releases, withdraws or
// unsubscribes.
func init() {
	mode := os.Getenv("BP16_CHILD")
	if mode == "" {
		return
	}
	opt, err := redis.ParseURL(os.Getenv("BP16_URL"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	opt.ContextTimeoutEnabled = true
	l := New(redis.NewClient(opt), Options{Prefix: os.Getenv("BP16_PREFIX"), Owner: "doomed", TTL: 2 * time.Second, Wait: time.Hour})
	if mode == "hold" {
		k, err := l.Acquire(context.Background(), "k")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("held", k.Fence())
	} else {
		fmt.Println("queueing")
		go l.Acquire(context.Background(), "k")
	}
	select {}
}

// startChild runs the child in mode under prefix and waits for its first
// line.
func startChild(t *testing.T, mode, prefix string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BP16_CHILD="+mode, "BP16_URL="+redistest.URL(t), "BP16_PREFIX="+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || len(line) < 4 || line[:5] == "error" {
		t.Fatalf("child %s: %q, %v", mode, line, err)
	}
	return cmd
}

// TestAttackBp16HolderKilled: the doc's promise that a crashed holder's
// key is free again within its TTL, with the next holder already queued
// (waiting on pub/sub and its poll) when the holder's process is SIGKILLed:
// that Acquire gets the key, with a higher fence, well before its Wait.
func TestAttackBp16HolderKilled(t *testing.T) {
	prefix := redistest.Prefix(t)
	cmd := startChild(t, "hold", prefix)
	l := newLocker(t, Options{Prefix: prefix, Owner: "next", Wait: 30 * time.Second})
	ctx := context.Background()
	var dead int64
	pgtest.Eventually(t, "the child holds the key", func() bool {
		tab, err := inspect(ctx, l, 10)
		if err != nil || len(tab.Locks) != 1 || tab.Locks[0].Owner != "doomed" {
			return false
		}
		dead = tab.Locks[0].Fence
		return true
	})
	type result struct {
		k   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		k, err := l.Acquire(ctx, "k")
		done <- result{k, err}
	}()
	pgtest.Eventually(t, "the next owner queues behind the child", func() bool {
		tab, err := inspect(ctx, l, 10)
		return err == nil && len(tab.Locks) == 1 && len(tab.Locks[0].Waiters) == 1 && tab.Locks[0].Waiters[0].Owner == "next"
	})
	cmd.Process.Kill()
	cmd.Wait()
	killed := time.Now()
	var got result
	select {
	case got = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("the queued Acquire still waits 25s after its 2s-TTL holder was killed")
	}
	if got.err != nil {
		t.Fatalf("the queued Acquire after the holder was killed: %v (after %v)", got.err, time.Since(killed))
	}
	defer got.k.Release(ctx)
	if got.k.Fence() <= dead {
		t.Errorf("next holder's fence %d, not above the killed holder's %d", got.k.Fence(), dead)
	}
	t.Logf("queued waiter got the key %v after the kill", time.Since(killed))
}

// TestAttackBp16QueuedWaiterKilled: a waiter at the head of the queue whose
// process is SIGKILLed (it never withdraws) must not keep the key from the
// waiter queued behind it when the holder releases: its registration lapses
// after waiterTTL and the next live waiter is served.
func TestAttackBp16QueuedWaiterKilled(t *testing.T) {
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	l := newLocker(t, Options{Prefix: prefix, Owner: "holder", Wait: 30 * time.Second})
	held, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	cmd := startChild(t, "queue", prefix)
	pgtest.Eventually(t, "the child queues", func() bool {
		tab, err := inspect(ctx, l, 10)
		return err == nil && len(tab.Locks) == 1 && len(tab.Locks[0].Waiters) == 1 && tab.Locks[0].Waiters[0].Owner == "doomed"
	})
	next := newLocker(t, Options{Prefix: prefix, Owner: "next", Wait: 30 * time.Second})
	type result struct {
		k   *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		k, err := next.Acquire(ctx, "k")
		done <- result{k, err}
	}()
	pgtest.Eventually(t, "the next owner queues behind the child", func() bool {
		tab, err := inspect(ctx, l, 10)
		return err == nil && len(tab.Locks) == 1 && len(tab.Locks[0].Waiters) == 2
	})
	cmd.Process.Kill()
	cmd.Wait()
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	var got result
	select {
	case got = <-done:
	case <-time.After(25 * time.Second):
		t.Fatal("the live waiter still waits 25s after the release, behind a killed waiter (waiterTTL 3s)")
	}
	if got.err != nil {
		t.Fatalf("the live waiter behind a killed one: %v (after %v)", got.err, time.Since(released))
	}
	defer got.k.Release(ctx)
	if got.k.Fence() <= held.Fence() {
		t.Errorf("fence %d not above the released holder's %d", got.k.Fence(), held.Fence())
	}
	t.Logf("live waiter got the key %v after the release", time.Since(released))
}

// TestAttackBp16ResumeUnderOOM: Resume now reads the hold's owner with the
// check script. Under maxmemory 1 + noeviction, a Resume of a live token in
// another Locker either returns the Lock with the hold's own owner and
// fence, or fails with the OOM reply: never ErrNotHeld, never a Lock that
// names the resuming Locker's owner. Its Release then releases or answers
// the reply, and once memory is back the key is released by the token.
func TestAttackBp16ResumeUnderOOM(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	ctx := context.Background()
	a := lockerOn(t, rdb, Options{Owner: "pod-a", TTL: time.Minute, Wait: replyWait})
	b := lockerOn(t, rdb, Options{Owner: "pod-b", Wait: replyWait})
	held, err := a.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	lift := func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") }
	defer lift()
	if err := rdb.Set(ctx, "oom-probe", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("precondition: a plain SET under maxmemory 1 answered %v, want OOM", err)
	}
	r, err := b.Resume(ctx, "k", held.Token())
	if err != nil {
		if errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("Resume of a live token under OOM: %v; want a Lock or the OOM reply", err)
		}
		t.Logf("Resume under OOM: %v", err)
		lift()
		r, err = b.Resume(ctx, "k", held.Token())
		if err != nil {
			t.Fatalf("Resume once memory is back: %v", err)
		}
	}
	if r.Owner() != "pod-a" || r.Fence() != held.Fence() {
		t.Errorf("resumed Lock: owner %q fence %d; want the hold's %q %d", r.Owner(), r.Fence(), "pod-a", held.Fence())
	}
	if err := r.Release(ctx); err != nil {
		if errors.Is(err, ErrNotHeld) || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("Release of the resumed Lock under OOM: %v; want nil or the OOM reply", err)
		}
		t.Logf("Release under OOM: %v", err)
		lift()
		if err := r.Release(ctx); err != nil {
			t.Fatalf("Release once memory is back: %v", err)
		}
	}
	lift()
	if h, err := b.IsLocked(ctx, "k"); err != nil || h {
		t.Errorf("after the resumed Lock's release the key is held = %v, %v", h, err)
	}
}
