package redislock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// TestOnlyLapsedRegistrationsLeaveKeyGrantable: more than 100 registrations (pophead's cut), all dead by
// the time the key is free, never leave the key ungrantable: a single
// TryAcquire after they died takes it (the queue keys expire with their
// last registration), and the first release cut at 100 leaves no holder.
func TestOnlyLapsedRegistrationsLeaveKeyGrantable(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, Options{Owner: "h"})
	k, err := l.Acquire(ctx, "k", lockcore.TTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const wttl = 300 * time.Millisecond
	for i := range 250 {
		registerWaiter(t, l, "k", fmt.Sprintf("dead%03d", i), wttl)
	}
	time.Sleep(wttl + 50*time.Millisecond) // every registration is now dead
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if tok := holderToken(t, l, "k"); tok != "" {
		t.Fatalf("after the release the key is held by %q (a dead registration)", tok)
	}
	got, err := l.TryAcquire(ctx, "k", lockcore.TTL(time.Second))
	if err != nil {
		n, _ := l.rdb.ZCard(ctx, keysFor(l.prefix, "k").queue).Result()
		t.Fatalf("a try after every registration died was refused: %v (queue length %d)", err, n)
	}
	_ = got.Release(ctx)
}
