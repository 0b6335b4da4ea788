//go:build attack

package lease

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// farewellProxy relays connections to the test server and, once armed,
// ends the first answer that completes at least three statements (a lock
// cycle's fast path, not the listener's) as PostgreSQL ends a session
// terminated while its commit waited for a synchronous standby: the
// transaction has committed locally, and instead of ReadyForQuery the
// client reads a WARNING saying so and a FATAL 57P01, and the connection
// closes.
type farewellProxy struct {
	dsn   string
	armed atomic.Bool
	fired atomic.Bool
	// at says whether an answer with these command tags, before its
	// ReadyForQuery, is the one to end.
	at func(tags []string) bool
}

func newFarewellProxy(t *testing.T) *farewellProxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	network, addr := "tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	if strings.HasPrefix(cfg.Host, "/") {
		network, addr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil || u.Scheme == "" {
		t.Fatalf("pgtest's DSN is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("host", dir)
	q.Set("port", "5432")
	q.Set("sslmode", "disable")
	u.Host, u.RawQuery = "", q.Encode()
	p := &farewellProxy{dsn: u.String(), at: func(tags []string) bool { return len(tags) >= 3 }}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial(network, addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() {
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, err := up.Write(buf[:n]); err != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				up.Close()
				c.Close()
			})
			wg.Go(func() { p.answers(c, up); up.Close(); c.Close() })
		}
	})
	return p
}

// answers relays the server's messages to the client one by one.
func (p *farewellProxy) answers(c, up net.Conn) {
	var tags []string
	head := make([]byte, 5)
	for {
		if _, err := readFull(up, head); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:]))
		msg := make([]byte, 1+n)
		copy(msg, head)
		if _, err := readFull(up, msg[5:]); err != nil {
			return
		}
		switch head[0] {
		case 'C':
			tags = append(tags, strings.TrimRight(string(msg[5:]), "\x00"))
		case 'Z':
			if p.armed.Load() && p.at(tags) && p.fired.CompareAndSwap(false, true) {
				c.Write(append(pgMessage('N', "SWARNING", "VWARNING", "C01000",
					"Mcanceling the wait for synchronous replication and terminating connection due to administrator command",
					"DThe transaction has already committed locally, but might not have been replicated to the standby."),
					pgMessage('E', "SFATAL", "VFATAL", "C57P01", "Mterminating connection due to administrator command")...))
				return
			}
			tags = nil
		}
		if _, err := c.Write(msg); err != nil {
			return
		}
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// pgMessage encodes a NoticeResponse or ErrorResponse of fields.
func pgMessage(typ byte, fields ...string) []byte {
	body := []byte{}
	for _, f := range fields {
		body = append(append(body, f...), 0)
	}
	body = append(body, 0)
	out := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(out[1:], uint32(4+len(body)))
	return append(out, body...)
}

// TestAttackFatalAfterCommit: the session of a TryAcquire's fast path
// ends with FATAL 57P01 after its transaction committed (a backend
// terminated while its commit waited for a synchronous standby: PostgreSQL
// warns "already committed locally" and ends the session). The request
// ran, so it must not be sent again as if it had not (README: a request
// that may have run is never resent): whatever TryAcquire answers, once it
// has returned no grant is left that nobody holds. A resend finds the
// first send's grant in its way, so TryAcquire answers ErrLocked (held by
// itself) and the grant stays, blocking the resource until its lease and
// grace pass.
func TestAttackFatalAfterCommit(t *testing.T) {
	// fast-keeping: a pool whose OnPgError keeps the connection on a FATAL
	// (pgconn then hands the FATAL over as a message, not an error).
	for _, path := range []string{"fast", "takeover", "fast-keeping"} {
		t.Run(path, func(t *testing.T) { bp10FatalAfterCommit(t, path) })
	}
}

// bp10FatalAfterCommit: the fast path (a free resource: the lock cycle's
// wire batch), or a takeover of a stale holder (attempt: pgx batches, an
// explicit COMMIT), ended by a FATAL after its commit.
func bp10FatalAfterCommit(t *testing.T, path string) {
	e := postgresEnv(t)
	p := newFarewellProxy(t)
	if path == "takeover" {
		p.at = func(tags []string) bool { return len(tags) > 0 && tags[len(tags)-1] == "COMMIT" }
	}
	cfg, err := pgxpool.ParseConfig(p.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	if path == "fast-keeping" {
		cfg.ConnConfig.OnPgError = func(*pgconn.PgConn, *pgconn.PgError) bool { return true }
	}
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m, err := OpenPostgres(ctxT(t), pool, testOptions(Options{Schema: e.where.Schema, Owner: "farewell", Lease: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	other := e.open(Options{Owner: "other"})
	r := Map("bp10-farewell")
	release(t, acquire(t, ctxT(t), m, r, Write)) // prepared, the resource's row exists
	if path == "takeover" {
		stale := e.open(Options{Owner: "stale", Lease: 200 * time.Millisecond, Heartbeat: -1, Grace: 50 * time.Millisecond})
		acquire(t, ctxT(t), stale, r, Write)
		pgtest.Eventually(t, "the holder is stale", func() bool {
			var n int
			return pgtest.Conn(t).QueryRow(ctxT(t), "SELECT count(*) FROM "+e.where.Schema+
				".dal_locks WHERE lease_expires < now() - interval '1 second'").Scan(&n) == nil && n == 1
		})
	}
	p.armed.Store(true)
	l, err := m.TryAcquire(ctxT(t), r, Write)
	if !p.fired.Load() {
		t.Fatal("the proxy did not end the fast path's session")
	}
	t.Logf("TryAcquire whose commit was followed by FATAL 57P01: %v", err)
	if err == nil {
		release(t, l)
		return
	}
	var n int
	if qerr := pgtest.Conn(t).QueryRow(ctxT(t), "SELECT count(*) FROM "+e.where.Schema+".dal_locks WHERE owner = 'farewell'").Scan(&n); qerr != nil || n != 0 {
		t.Fatalf("TryAcquire failed (%v) and left %d grants of its owner (%v): nobody holds them", err, n, qerr)
	}
	l2, err := other.TryAcquire(ctxT(t), r, Write)
	if err != nil {
		t.Fatalf("another Manager's TryAcquire afterwards: %v", err)
	}
	release(t, l2)
}
