package pgtest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Proxy relays connections to a test server through a Unix socket of its
// own, and can freeze: bytes are then held back, so the server seems to
// stop answering, until Thaw. Tests use it for a server that hangs.
type Proxy struct {
	dsn    string
	ln     net.Listener
	target func() (net.Conn, error)

	mu     sync.Mutex
	frozen chan struct{} // non-nil while frozen; closed by thaw or close
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to the server of dsn, closed when the test ends.
func NewProxy(t testing.TB, dsn string) *Proxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
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
	p := &Proxy{ln: ln, target: func() (net.Conn, error) { return net.Dial(network, addr) }}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		p.dsn = dsn + fmt.Sprintf(" host='%s' port=5432 sslmode=disable", dir)
	} else {
		q := u.Query()
		q.Set("host", dir)
		q.Set("port", "5432")
		q.Set("sslmode", "disable")
		u.Host, u.RawQuery = "", q.Encode()
		p.dsn = u.String()
	}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.relay(c) })
	}
}

func (p *Proxy) relay(c net.Conn) {
	up, err := p.target()
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { p.pipe(up, c); up.Close(); c.Close() })
	wg.Go(func() { p.pipe(c, up); up.Close(); c.Close() })
	wg.Wait()
}

func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitThawed()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) waitThawed() {
	p.mu.Lock()
	ch := p.frozen
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// Freeze holds back every byte in both directions until Thaw.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = make(chan struct{})
	}
}

// Thaw lets held-back bytes through again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
}

func (p *Proxy) close() {
	p.Thaw()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// DSN returns a DSN that reaches the server through the proxy.
func (p *Proxy) DSN() string { return p.dsn }
