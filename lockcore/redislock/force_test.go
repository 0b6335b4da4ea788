package redislock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// replyLoser is a connection that loses the reply to the first command
// carrying mark once armed: Redis runs the command, the client sees the
// connection drop, and go-redis retries it on a new one.
type replyLoser struct {
	net.Conn
	mark  []byte
	armed *atomic.Bool
	drop  bool
}

func (c *replyLoser) Write(b []byte) (int, error) {
	if bytes.Contains(b, c.mark) && c.armed.CompareAndSwap(true, false) {
		c.drop = true
	}
	return c.Conn.Write(b)
}

func (c *replyLoser) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.drop && n > 0 {
		c.Conn.Close() // the reply came, and is lost
		return 0, io.EOF
	}
	return n, err
}

// A ForceRelease whose reply was lost and which go-redis retried must not
// release the waiter the first run handed the key to (issue 31, also
// noted).
func TestForceReleaseRetriedAfterLostReply(t *testing.T) {
	holder := newLocker(t, Options{Owner: "holder"})
	var armed atomic.Bool
	opt := redistest.Options(t)
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &replyLoser{Conn: c, mark: []byte(forceScript.Hash()), armed: &armed}, nil
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	admin := lockerOn(t, rdb, Options{Prefix: holder.prefix, Owner: "admin"})
	ctx := context.Background()
	if err := forceScript.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	k, err := holder.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	registerWaiter(t, holder, "k", "NEXT", 30e9)
	armed.Store(true)
	ok, err := admin.ForceRelease(ctx, "k", "stuck")
	if !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	if armed.Load() {
		t.Fatal("no reply was lost: the test did not test")
	}
	if tok := holderToken(t, holder, "k"); tok != "NEXT" {
		t.Errorf("holder after a retried force release %q, want NEXT (the waiter the release handed it to)", tok)
	}
	if recs, _ := admin.Audit(ctx); len(recs) != 1 || recs[0].VictimFence != k.Fence() {
		t.Errorf("audit: %+v, want one record of the first holder", recs)
	}
}

// A force release announced between a grant and its watch (With between
// its Acquire and its run, stretched on a loaded box) still ends the hold
// once watched, instead of at the next extend a third of the TTL later:
// TestCluster's victim of a force release missed it that way.
func TestForceReleaseBeforeWatch(t *testing.T) {
	victim := newLocker(t, Options{Owner: "victim", TTL: time.Minute})
	admin := newLocker(t, Options{Prefix: victim.prefix, Owner: "admin"})
	ctx := context.Background()
	within(t, "the victim's listener subscribes", victim.listen(), 10*time.Second)
	defer victim.unlisten()
	notices := make(chan struct{}, 2)
	beforeNotice.set(func() { notices <- struct{}{} })
	t.Cleanup(beforeNotice.clear)

	k, err := victim.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := admin.ForceRelease(ctx, "k", "test"); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	within(t, "the force notice arrives", notices, 10*time.Second)
	// Notices are handled in order: once a second one arrives, the force
	// notice has been dispatched, to no watched hold.
	if err := redistest.Client(t).Publish(ctx, victim.channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	within(t, "the marker arrives", notices, 10*time.Second)

	if cause := context.Cause(k.Context()); !errors.Is(cause, ErrLost) {
		t.Errorf("a hold watched after its force release was announced: cause %v, want ErrLost", cause)
	}
}
