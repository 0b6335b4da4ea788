package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/testca"
)

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
		}), wc, nil)
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
	ca := testca.New(t)
	addr, wc := serveWith(t, "tls_server_config:\n  cert_file: "+ca.CertFile+"\n  key_file: "+ca.KeyFile+"\n")
	if !wc.TLS || wc.Scheme() != "https" || !wc.Open() {
		t.Errorf("LoadWebConfig = %+v, want TLS with no authentication", wc)
	}
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.Client(false)}}
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
	ca := testca.New(t)
	addr, wc := serveWith(t, "tls_server_config:\n  cert_file: "+ca.CertFile+"\n  key_file: "+ca.KeyFile+
		"\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: "+ca.CAFile+"\n")
	if !wc.ClientCerts || wc.Open() {
		t.Errorf("LoadWebConfig = %+v, want client certificates", wc)
	}
	without := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.Client(false)}}
	if code, err := getAs(t, without, "https://"+addr+"/", "", ""); err == nil {
		t.Errorf("GET without a client certificate = %d, want a refused handshake", code)
	}
	with := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.Client(true)}}
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

// The README's example, examples/web-config.yml, is a file the toolkit
// takes (with real certificate paths), and its user's password is the one
// it says.
//
// The example's hash is checked here, and served re-hashed at bcrypt's
// lowest cost: at cost 10, under -race on a loaded machine, the server's
// check outlasted ServeConfig's 30 s WriteTimeout, and a TLS write cut
// off by its deadline reaches the client as "tls: bad record MAC".
func TestExampleWebConfig(t *testing.T) {
	raw, err := os.ReadFile("../../../examples/web-config.yml")
	if err != nil {
		t.Fatal(err)
	}
	const user, pass = "prometheus", "change-me"
	var c web.Config
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	hash := string(c.Users[user])
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(pass)); err != nil {
		t.Fatalf("the example's %s: %v; want the password %q", user, err, pass)
	}
	cheap, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	ca := testca.New(t)
	body := strings.NewReplacer("/etc/locktop/server.crt", ca.CertFile, "/etc/locktop/server.key", ca.KeyFile, hash, string(cheap)).Replace(string(raw))
	addr, wc := serveWith(t, body)
	if !wc.TLS || wc.Users != 1 {
		t.Fatalf("LoadWebConfig(example) = %+v, want TLS and one user", wc)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.Client(false)}}
	if code, err := getAs(t, client, "https://"+addr+"/", user, pass); err != nil || code != http.StatusOK {
		t.Errorf("GET as the example's user = %d, %v; want 200", code, err)
	}
}
