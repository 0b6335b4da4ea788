package pgsource_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// connectErr connects to dsn and returns the *ConnectError it must fail with.
func connectErr(t *testing.T, dsn string) *pgsource.ConnectError {
	t.Helper()
	m, err := pgsource.Connect(context.Background(), dsn, pgsource.Options{})
	if err == nil {
		m.Close()
		t.Fatalf("connected to %s", dsn)
	}
	var ce *pgsource.ConnectError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want a *ConnectError", err, err)
	}
	if strings.Contains(ce.Error(), "\n") {
		t.Errorf("message %q has a newline", ce.Error())
	}
	return ce
}

// With no password given at all, the message says so instead of calling
// the password wrong.
func TestConnectNoPassword(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	pgtest.Role(t, "nopw_role", "the-right-one")
	dsn, err := pgtest.WithUser(pgtest.DSN(t), "nopw_role", "")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dsn)
	u.User = url.User("nopw_role") // no password at all, not an empty one
	ce := connectErr(t, u.String())
	msg := ce.Error()
	if ce.Kind != pgsource.KindAuth || strings.Contains(msg, "wrong password") || !strings.Contains(msg, "no password") {
		t.Errorf("kind %d, message %q: want KindAuth saying no password was given", ce.Kind, msg)
	}
}

// tcpRelay listens on loopback TCP and relays each connection to the Unix
// socket of dsn's server, so a client speaks TCP (and asks for TLS) to a
// real server that only listens on a socket.
func tcpRelay(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(cfg.Host, ".s.PGSQL."+fmtPort(cfg.Port))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", sock)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func fmtPort(p uint16) string { return big.NewInt(int64(p)).String() }

// tlsServer answers PostgreSQL's SSLRequest with 'S' and then a TLS
// handshake with a self-signed certificate no client trusts: what a server
// whose certificate is not the one expected looks like to the client.
func tlsServer(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "untrusted.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"untrusted.example"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var req [8]byte
			if _, err := io.ReadFull(c, req[:]); err != nil {
				c.Close()
				continue
			}
			_, _ = c.Write([]byte{'S'})
			s := tls.Server(c, conf)
			_ = s.SetDeadline(time.Now().Add(30 * time.Second))
			_ = s.Handshake()
			s.Close()
		}
	}()
	return ln.Addr().String()
}

// A certificate the client does not trust, or a server that will not speak
// TLS when the DSN requires it, is a TLS failure, not "cannot reach".
//
// Both fail within a few milliseconds when healthy, but the connect budget
// also bounds the whole Connect (pool, TCP, handshake under -race): a
// starved CPU has taken 2.4s of it, and a budget that ran out would be
// reported as a timeout, not a TLS failure. Hence 30s, never waited out.
func TestConnectTLSFailures(t *testing.T) {
	relay := tcpRelay(t, pgtest.DSN(t))
	untrusted := tlsServer(t)
	for _, tc := range []struct {
		name, dsn, want string
	}{
		{"untrusted certificate", "postgres://u:pw@" + untrusted + "/db?sslmode=verify-full&connect_timeout=30", "certificate"},
		{"TLS refused", "postgres://postgres@" + relay + "/postgres?sslmode=require&connect_timeout=30", "TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ce := connectErr(t, tc.dsn)
			msg := ce.Error()
			if ce.Kind != pgsource.KindTLS || strings.Contains(msg, "cannot reach") || !strings.Contains(msg, tc.want) {
				t.Errorf("kind %d, message %q: want KindTLS mentioning %q", ce.Kind, msg, tc.want)
			}
		})
	}
}

// After the server restarts, the pooled connection is dead: the next poll
// retries on a fresh one and succeeds, so the dashboard shows no banner for
// a server that is back. The same after the monitor's backend is
// terminated.
//
// Parallel: its time is its own server starting and restarting.
func TestPollAfterRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("no server of the test's own: %v", err)
	}
	defer c.Stop()
	m, err := pgsource.Connect(ctx, c.DSN("postgres"), pgsource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Poll(ctx); err != nil {
		t.Errorf("first poll after a restart: %v", err)
	}

	// The monitor's own backend terminated while idle.
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", pgsource.ApplicationName); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Poll(ctx); err != nil {
		t.Errorf("first poll after the backend was terminated: %v", err)
	}
}
