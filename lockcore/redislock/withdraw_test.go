package redislock

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
)

// refuser is a dialer that can start refusing connections, as a Redis
// that went away does, and drop the connections it made.
type refuser struct {
	refuse atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func (r *refuser) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if r.refuse.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
	}
	return c, err
}

// cut makes the dialer refuse and closes every connection it made.
func (r *refuser) cut() {
	r.refuse.Store(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// Issue 31, fault 2: a poll that failed with a refused dial skipped the
// withdraw, although an earlier poll had registered the waiter; the
// release then handed the key to a waiter that had given up. The outage
// here ends as the withdraw starts, so a withdraw that is tried succeeds.
func TestRefusedPollWithdraws(t *testing.T) {
	var d refuser
	t.Cleanup(func() { beforeWithdraw = nil })
	beforeWithdraw = func() { d.refuse.Store(false) }
	holder := newLocker(t, Options{Owner: "holder"})
	opt := redistest.Options(t)
	opt.Dialer = d.dial
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	waiter := lockerOn(t, rdb, Options{Prefix: holder.prefix, Owner: "waiter"})
	ctx := context.Background()
	k, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, "k", lockcore.Wait(20e9))
		got <- err
	}()
	waitForWaiters(t, holder, "k", 1)
	d.cut()
	if err := <-got; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Acquire while the dialer refuses: %v, want ErrUnavailable", err)
	}
	if ws := waiters(t, holder, "k"); len(ws) != 0 {
		t.Errorf("the failed waiter is still queued: %+v", ws)
	}
}
