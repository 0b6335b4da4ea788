package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// acquired is what a waiter's Acquire, run in the background, returned and
// when.
type acquired struct {
	l   *Lock
	err error
	at  time.Time
}

// acquireLater runs a waiter's Acquire of key (a wait of 10 s, a TTL of a
// minute) in the background; its result arrives on the channel.
func acquireLater(ctx context.Context, l *Locker, key string) <-chan acquired {
	got := make(chan acquired, 1)
	go func() {
		lk, err := l.Acquire(ctx, key, lockcore.Wait(10*time.Second), lockcore.TTL(time.Minute))
		got <- acquired{lk, err, time.Now()}
	}()
	return got
}

// roundTrips is what a bound on a waiter's grant allows for its round
// trips and scripts on top of the timers it is made of: a loaded box (CI,
// with -race) may spend most of a second on them. The faults those bounds
// catch cost whole claims or polls per dead waiter, seconds in all.
const roundTrips = time.Second

// grantedWithin waits for the waiter's grant, which must come no later than
// bound after start (the release it waited for); it waits bound+slack
// before it gives up.
func grantedWithin(t *testing.T, got <-chan acquired, start time.Time, bound, slack time.Duration) *Lock {
	t.Helper()
	var r acquired
	select {
	case r = <-got:
	case <-time.After(bound + slack):
		t.Fatalf("the live waiter had not got the lock %v after the release (bound %v)", time.Since(start).Round(time.Millisecond), bound)
	}
	if r.err != nil {
		t.Fatalf("the live waiter's Acquire failed %v after the release: %v", r.at.Sub(start).Round(time.Millisecond), r.err)
	}
	took := r.at.Sub(start)
	t.Logf("the live waiter got the lock %v after the release (bound %v)", took.Round(time.Millisecond), bound)
	if took > bound {
		t.Errorf("the live waiter got the lock %v after the release, over the bound %v", took.Round(time.Millisecond), bound)
	}
	return r.l
}
