package lockcore

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore/registry"
)

// The lock statement's WHERE clause sets lock_timeout before the lock is
// taken, so the server itself gives up (55P03), and the setting is local to
// the statement.
func TestLockStatementTimesOutOnServer(t *testing.T) {
	for _, key := range []Key{Pair(registry.SpaceAgent, 900001), Int64(-900001)} {
		holder := pgtest.Conn(t)
		if _, err := holder.Exec(context.Background(), plainSQL(key).lockWithin, keyArgs(key, "1000")...); err != nil {
			t.Fatalf("holder: %v", err)
		}
		waiter := pgtest.Conn(t)
		_, err := waiter.Exec(context.Background(), plainSQL(key).lockWithin, keyArgs(key, "50")...)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			t.Fatalf("%v: waiter err = %v, want SQLSTATE 55P03 from the server's lock_timeout", key, err)
		}
		var lt string
		if err := waiter.QueryRow(context.Background(), "SHOW lock_timeout").Scan(&lt); err != nil || lt != "0" {
			t.Errorf("lock_timeout after the statement = %q (%v), want 0", lt, err)
		}
	}
}

// The unconditional unlock after a failed acquire cleans up a lock the
// server did grant (bug #17686): counted, reported, and the connection is
// closed. With nothing held it is a quiet no-op.
func TestCleanupFailedCountsPhantom(t *testing.T) {
	pool := pgtest.Pool(t, func(c *pgxpool.Config) { c.MaxConns = 2 })
	var phantoms []Event
	s := New(pool, Observe(func(e Event) {
		if e.Kind == EventPhantom {
			phantoms = append(phantoms, e)
		}
	}))
	key := Pair(registry.SpaceAgent, 900002)
	ctx := context.Background()

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := conn.Conn()
	pid := raw.PgConn().PID()
	if _, err := conn.Exec(ctx, plainSQL(key).lockWithin, keyArgs(key, "1000")...); err != nil {
		t.Fatal(err)
	}
	s.cleanupFailed(conn, key, false) // as if the acquire had failed after the grant
	if s.Phantoms() != 1 || len(phantoms) != 1 || phantoms[0].PID != pid {
		t.Fatalf("phantoms = %d, events %+v; want 1 for pid %d", s.Phantoms(), phantoms, pid)
	}
	if !raw.IsClosed() {
		t.Error("connection of a failed acquire not closed")
	}
	other := pgtest.Conn(t)
	var ok bool
	if err := other.QueryRow(ctx, plainSQL(key).try, keyArgs(key)...).Scan(&ok); err != nil || !ok {
		t.Errorf("key not free after cleanup: %v %v", ok, err)
	}

	conn2, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.cleanupFailed(conn2, Pair(registry.SpaceAgent, 900003), false) // nothing held: unlock returns false
	if s.Phantoms() != 1 {
		t.Errorf("phantoms = %d after a clean failure, want still 1", s.Phantoms())
	}
}

// Lock connections over TCP get keepalive probes (a silent network is then
// noticed within Idle + Interval*Count); Unix sockets are left alone.
func TestSetKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if peer := <-accepted; peer != nil {
		defer peer.Close()
	}
	k := net.KeepAliveConfig{Enable: true, Idle: 7 * time.Second, Interval: 3 * time.Second, Count: 4}
	if err := setKeepAlive(c, k); err != nil {
		t.Fatal(err)
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	err = raw.Control(func(fd uintptr) {
		for name, opt := range map[string][2]int{
			"SO_KEEPALIVE":  {syscall.SOL_SOCKET, syscall.SO_KEEPALIVE},
			"TCP_KEEPIDLE":  {syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE},
			"TCP_KEEPINTVL": {syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL},
			"TCP_KEEPCNT":   {syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT},
		} {
			v, err := syscall.GetsockoptInt(int(fd), opt[0], opt[1])
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			got[name] = v
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 7, "TCP_KEEPINTVL": 3, "TCP_KEEPCNT": 4}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %d, want %d", name, got[name], v)
		}
	}
	a, b := net.Pipe() // neither TCP nor Unix: nothing to set, no error
	defer a.Close()
	defer b.Close()
	if err := setKeepAlive(a, k); err != nil {
		t.Errorf("setKeepAlive on a pipe: %v", err)
	}
}
