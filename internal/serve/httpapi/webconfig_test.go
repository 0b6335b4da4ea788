package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/locktop/locktop/internal/serve/httpapi"
)

// testCA is a throw-away certificate authority with a server certificate
// for 127.0.0.1 and a client certificate, written under a temp directory.
type testCA struct {
	dir                       string
	pool                      *x509.CertPool
	clientCert                tls.Certificate
	caFile, certFile, keyFile string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "locktop test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, name string) ([]byte, []byte) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
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
		kb, _ := x509.MarshalECPrivateKey(key)
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	}
	c := &testCA{dir: dir, pool: x509.NewCertPool()}
	c.pool.AddCert(ca)
	c.caFile, c.certFile, c.keyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	writeFile(t, c.caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	sc, sk := issue(2, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	writeFile(t, c.certFile, string(sc))
	writeFile(t, c.keyFile, string(sk))
	cc, ck := issue(3, x509.ExtKeyUsageClientAuth, "prometheus")
	if c.clientCert, err = tls.X509KeyPair(cc, ck); err != nil {
		t.Fatal(err)
	}
	return c
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// serveWith serves a handler answering "ok" under the web config body on
// a loopback port, and returns its address.
func serveWith(t *testing.T, config string) (string, httpapi.WebConfig) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "web.yml")
	writeFile(t, path, config)
	wc, err := httpapi.LoadWebConfig(path)
	if err != nil {
		t.Fatalf("LoadWebConfig: %v", err)
	}
	ln, err := httpapi.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- httpapi.ServeConfig(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "ok")
		}), wc)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeConfig: %v", err)
		}
	})
	return ln.Addr().String(), wc
}

func getAs(t *testing.T, c *http.Client, url, user, pass string) (int, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestWebConfigBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	addr, wc := serveWith(t, "basic_auth_users:\n  ops: "+string(hash)+"\n")
	if wc.TLS || wc.Users != 1 || wc.Open() {
		t.Errorf("LoadWebConfig = %+v, want one user, no TLS", wc)
	}
	url := "http://" + addr + "/"
	for _, tc := range []struct {
		user, pass string
		want       int
	}{
		{"", "", http.StatusUnauthorized},
		{"ops", "wrong", http.StatusUnauthorized},
		{"nobody", "s3cret", http.StatusUnauthorized},
		{"ops", "s3cret", http.StatusOK},
	} {
		code, err := getAs(t, http.DefaultClient, url, tc.user, tc.pass)
		if err != nil || code != tc.want {
			t.Errorf("GET as %q/%q = %d, %v; want %d", tc.user, tc.pass, code, err, tc.want)
		}
	}
}

func TestWebConfigTLS(t *testing.T) {
	ca := newTestCA(t)
	addr, wc := serveWith(t, "tls_server_config:\n  cert_file: "+ca.certFile+"\n  key_file: "+ca.keyFile+"\n")
	if !wc.TLS || wc.Scheme() != "https" || !wc.Open() {
		t.Errorf("LoadWebConfig = %+v, want TLS with no authentication", wc)
	}
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	if code, err := getAs(t, tlsClient, "https://"+addr+"/", "", ""); err != nil || code != http.StatusOK {
		t.Errorf("GET over TLS = %d, %v; want 200", code, err)
	}
	// Plain HTTP to the TLS port gets a clean 400 from the TLS server, and
	// the server goes on serving.
	code, err := getAs(t, http.DefaultClient, "http://"+addr+"/", "", "")
	if err != nil || code != http.StatusBadRequest {
		t.Errorf("plain GET to the TLS port = %d, %v; want 400", code, err)
	}
	untrusting := &http.Client{Transport: &http.Transport{}}
	if _, err := getAs(t, untrusting, "https://"+addr+"/", "", ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET trusting no CA: %v, want a certificate error", err)
	}
	if code, err := getAs(t, tlsClient, "https://"+addr+"/", "", ""); err != nil || code != http.StatusOK {
		t.Errorf("GET over TLS after the plain one = %d, %v; want 200", code, err)
	}
}

func TestWebConfigClientCertificate(t *testing.T) {
	ca := newTestCA(t)
	addr, wc := serveWith(t, "tls_server_config:\n  cert_file: "+ca.certFile+"\n  key_file: "+ca.keyFile+
		"\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: "+ca.caFile+"\n")
	if !wc.ClientCerts || wc.Open() {
		t.Errorf("LoadWebConfig = %+v, want client certificates", wc)
	}
	without := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}}
	if code, err := getAs(t, without, "https://"+addr+"/", "", ""); err == nil {
		t.Errorf("GET without a client certificate = %d, want a refused handshake", code)
	}
	with := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{ca.clientCert}}}}
	if code, err := getAs(t, with, "https://"+addr+"/", "", ""); err != nil || code != http.StatusOK {
		t.Errorf("GET with a client certificate = %d, %v; want 200", code, err)
	}
}

func TestLoadWebConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"plain-password.yml": "basic_auth_users:\n  ops: notahash\n",
		"missing-cert.yml":   "tls_server_config:\n  cert_file: /nonexistent/server.crt\n  key_file: /nonexistent/server.key\n",
		"not-yaml.yml":       "tls_server_config: [\n",
	} {
		path := filepath.Join(dir, name)
		writeFile(t, path, body)
		_, err := httpapi.LoadWebConfig(path)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: LoadWebConfig error = %v; want one line naming the file", name, err)
		}
	}
	if _, err := httpapi.LoadWebConfig(filepath.Join(dir, "absent.yml")); err == nil {
		t.Error("LoadWebConfig of a missing file: no error")
	}
}
