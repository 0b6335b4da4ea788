package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/redislock"
)

// client stands for your application's Redis client. ContextTimeoutEnabled
// lets contexts bound commands on a Redis that hangs.
func client() *redis.Client {
	opt, err := redis.ParseURL(redistest.ServerURL()) // e.g. "redis://localhost:6379/0"
	if err != nil {
		panic(err)
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt)
}

// Seed 002's basic usage: one turn at a time per conversation.
func Example() {
	rdb := client()
	defer rdb.Close()
	locker := redislock.New(rdb, redislock.Options{Prefix: "example:"}) // TTL 30s, wait 5s
	defer locker.Close()
	ctx := context.Background()

	key := redislock.SessionKey("tenant-1", "agent-1", "customer-1", "web")
	err := locker.With(ctx, key, func(ctx context.Context) error {
		// Safe to process the turn. ctx is cancelled (cause ErrLost) if the
		// hold is lost; the hold is extended while this runs.
		fmt.Println("processing the turn")
		return nil
	})
	switch {
	case errors.Is(err, redislock.ErrTimeout):
		fmt.Println("busy: queue the message or answer 'please wait'")
	case errors.Is(err, redislock.ErrUnavailable):
		fmt.Println("Redis is down")
	case err != nil:
		fmt.Println("turn failed:", err)
	}
	// Output: processing the turn
}

// A hold across the steps of a workflow (seed 002's LogicalTurnWorkflow):
// acquired in step 1 without a context manager, its token kept in the
// workflow state, released at commit by whichever worker runs that step.
func Example_workflow() {
	rdb := client()
	defer rdb.Close()
	ctx := context.Background()
	key := redislock.SessionKey("tenant-1", "agent-1", "customer-2", "sms")

	// Step 1, on pod A.
	podA := redislock.New(rdb, redislock.Options{Prefix: "example:", Owner: "pod-a"})
	defer podA.Close()
	lock, err := podA.Acquire(ctx, key, lockcore.Wait(10*time.Second), lockcore.TTL(300*time.Second))
	if err != nil {
		fmt.Println("mutex acquisition failed:", err)
		return
	}
	state := map[string]any{"session_lock_token": lock.Token(), "fence": lock.Fence()}

	// Step 4 (commit_and_respond), on pod B.
	podB := redislock.New(rdb, redislock.Options{Prefix: "example:", Owner: "pod-b"})
	defer podB.Close()
	held, err := podB.Resume(ctx, key, state["session_lock_token"].(string))
	if errors.Is(err, redislock.ErrNotHeld) {
		fmt.Println("the hold expired: do not commit")
		return
	}
	fmt.Println("same grant:", held.Fence() == state["fence"])
	// ... commit, writing the fence beside the data ...
	fmt.Println("release:", held.Release(ctx))
	// A second release (on_failure after a commit, say) deletes nothing.
	fmt.Println("again:", errors.Is(lock.Release(ctx), redislock.ErrNotHeld))
	// Output:
	// same grant: true
	// release: <nil>
	// again: true
}

// An operator frees a conversation stuck behind a crashed pod; the force
// release is audited.
func ExampleLocker_ForceRelease() {
	rdb := client()
	defer rdb.Close()
	ctx := context.Background()
	key := redislock.SessionKey("tenant-1", "agent-1", "customer-3", "web")
	crashed := redislock.New(rdb, redislock.Options{Prefix: "example-force:", Owner: "pod-c"})
	defer crashed.Close()
	if _, err := crashed.Acquire(ctx, key, lockcore.TTL(300*time.Second)); err != nil {
		fmt.Println(err)
		return
	}

	admin := redislock.New(rdb, redislock.Options{Prefix: "example-force:", Owner: "operator"})
	defer admin.Close()
	freed, err := admin.ForceRelease(ctx, key, "pod-c crashed mid-turn")
	fmt.Println("freed:", freed, err)
	records, _ := admin.Audit(ctx)
	r := records[0]
	fmt.Printf("%s by %s: %q (was held by %s)\n", r.Key, r.Actor, r.Reason, r.VictimOwner)
	// Output:
	// freed: true <nil>
	// tenant-1:agent-1:customer-3:web by operator: "pod-c crashed mid-turn" (was held by pod-c)
}
