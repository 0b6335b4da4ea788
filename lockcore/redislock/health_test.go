package redislock

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// holeConn goes silent once cut, as a connection to a primary cut off in
// a failover does: writes vanish, reads never return, nothing says so.
type holeConn struct {
	net.Conn
	cut atomic.Bool
}

func (c *holeConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b) // read deadlines still fire, as on a real socket
		if !c.cut.Load() || err != nil {
			return n, err
		}
	}
}

// Close leaves a cut connection open: its close would not reach the
// server either. The test closes it at its end.
func (c *holeConn) Close() error {
	if c.cut.Load() {
		return nil
	}
	return c.Conn.Close()
}

func (c *holeConn) Write(b []byte) (int, error) {
	if c.cut.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// The listener finds a half-open connection by its health check and
// subscribes again on a new one (issue 31, also noted: it waited on it
// forever, and notices fell back to the 500ms poll).
func TestListenerRedialsHalfOpen(t *testing.T) {
	old := healthEvery
	healthEvery = 100 * time.Millisecond
	t.Cleanup(func() { healthEvery = old })
	var (
		mu    sync.Mutex
		conns []*holeConn
	)
	opt := redistest.Options(t)
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		h := &holeConn{Conn: c}
		mu.Lock()
		conns = append(conns, h)
		mu.Unlock()
		return h, nil
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	l := lockerOn(t, rdb, Options{Prefix: redistest.Prefix(t)})
	<-l.listen()
	defer l.unlisten()
	mu.Lock()
	cut := conns
	for _, c := range cut {
		c.cut.Store(true)
	}
	mu.Unlock()
	t.Cleanup(func() {
		for _, c := range cut {
			c.Conn.Close()
		}
	})
	other := redistest.Client(t)
	// The half-open connection stays subscribed on the server's side: a
	// second subscription is the listener's new connection.
	pgtest.Eventually(t, "the listener subscribes on a new connection", func() bool {
		n, err := other.PubSubNumSub(context.Background(), l.channel).Result()
		return err == nil && n[l.channel] == 2
	})
}
