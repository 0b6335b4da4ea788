package redislock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A force-release notice from a Locker older than the fenced form ("r
// token", no fence) still ends the token's grant, whichever grant it is:
// dispatched to a watched hold, or remembered until the hold's watch
// begins.
func TestForceReleaseLegacyNotice(t *testing.T) {
	for _, tc := range []struct {
		name string
		// early: the notice comes before the hold is watched.
		early bool
	}{{"watched", false}, {"before the watch", true}} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocker(t, Options{Owner: "p", TTL: time.Minute})
			ctx := context.Background()
			within(t, "the listener subscribes", l.listen(), 10*time.Second)
			defer l.unlisten()
			notices := make(chan string, 4)
			beforeNotice.set(func() { notices <- "" })
			t.Cleanup(beforeNotice.clear)

			k, err := l.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			var c context.Context
			if !tc.early {
				c = k.Context()
			}
			if err := l.rdb.Publish(ctx, l.channel, "r "+k.Token()).Err(); err != nil {
				t.Fatal(err)
			}
			within(t, "the notice arrives", waitNotices(notices, 1), 10*time.Second)
			within(t, "a marker after it arrives", marker(l, notices), 10*time.Second)
			if tc.early {
				c = k.Context()
			}
			select {
			case <-c.Done():
			default:
				t.Fatal("a two-field force-release notice (\"r token\") did not end the token's grant")
			}
			if !errors.Is(context.Cause(c), ErrLost) {
				t.Errorf("cause %v, want ErrLost", context.Cause(c))
			}
		})
	}
}
