// Package testca makes a throw-away certificate authority for tests: a CA,
// a server certificate for 127.0.0.1 and a client certificate, written as
// PEM files under the test's temp directory, so TLS and client
// certificates are tested for real with no openssl and no network.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throw-away certificate authority and what it issued.
type CA struct {
	// Pool trusts the CA: a client's RootCAs.
	Pool *x509.CertPool
	// ClientCert is a client certificate the CA signed.
	ClientCert tls.Certificate
	// CAFile, CertFile and KeyFile are the CA's certificate and the
	// server's certificate and key (for 127.0.0.1), as PEM files.
	CAFile, CertFile, KeyFile string
}

// New makes a CA valid for an hour around now, or fails the test.
func New(t testing.TB) *CA {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "locktop test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, usage x509.ExtKeyUsage, name string) ([]byte, []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	c := &CA{Pool: x509.NewCertPool()}
	c.Pool.AddCert(ca)
	c.CAFile, c.CertFile, c.KeyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	sc, sk := issue(2, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	cc, ck := issue(3, x509.ExtKeyUsageClientAuth, "prometheus")
	for path, body := range map[string][]byte{
		c.CAFile:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		c.CertFile: sc,
		c.KeyFile:  sk,
	} {
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if c.ClientCert, err = tls.X509KeyPair(cc, ck); err != nil {
		t.Fatal(err)
	}
	return c
}

// Client is an HTTPS client that trusts the CA, presenting the client
// certificate when withCert is true.
func (c *CA) Client(withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: c.Pool}
	if withCert {
		cfg.Certificates = []tls.Certificate{c.ClientCert}
	}
	return cfg
}
