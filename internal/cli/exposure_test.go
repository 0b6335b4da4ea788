package cli

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/testca"
)

// serve on an address other machines can reach, with a web config of TLS
// and a basic-auth user: it warns what it exposes; without the password
// or with a wrong one it answers 401; with it, /api/locks shows the
// session's query with its literals replaced, and so does the recording.
func TestServeExposure(t *testing.T) {
	const literal = "a@b.c"
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 8181), '"+literal+"' AS email"); err != nil {
		t.Fatal(err)
	}
	ca := testca.New(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	web := filepath.Join(dir, "web.yml")
	config := "tls_server_config:\n  cert_file: " + ca.CertFile + "\n  key_file: " + ca.KeyFile + "\nbasic_auth_users:\n  ops: " + string(hash) + "\n"
	if err := os.WriteFile(web, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "serve.ltrec")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runServe(ctx, []string{"--dsn", pgtest.DSN(t), "--http", "0.0.0.0:0", "--interval", "100ms",
			"--web.config.file", web, "--record", rec}, &stdout, &stderr)
	}()
	u, err := url.Parse(waitURL(t, &stdout, errc))
	if err != nil {
		t.Fatal(err)
	}
	base := u.Scheme + "://127.0.0.1:" + u.Port()
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("serve listens on %s, want https", base)
	}
	if w := stderr.String(); !strings.Contains(w, "reachable from other machines") || !strings.Contains(w, "normalized") || strings.Count(w, "\n") != 1 {
		t.Errorf("stderr %q: want one warning saying the query text is normalized", w)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.Client(false)}}
	get := func(user, pass string) (int, string) {
		req, _ := http.NewRequest("GET", base+"/api/locks", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("", ""); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code, _ := get("ops", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", code)
	}
	code, body := get("ops", "s3cret")
	if code != http.StatusOK || !strings.Contains(body, "pg_advisory_lock($1, $2), $3 AS email") || strings.Contains(body, literal) {
		t.Errorf("/api/locks: %d, want the query normalized:\n%s", code, body)
	}
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}
	if resp, err := plain.Get(strings.Replace(base, "https://", "http://", 1) + "/api/locks"); err == nil {
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS port: %d, want 400", resp.StatusCode)
		}
		resp.Body.Close()
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("serve: %v", err)
	}

	r, err := recording.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.QueryText != "normalized" {
		t.Errorf("the recording's header says query text %q, want normalized", r.Header.QueryText)
	}
	seen := false
	for i := range r.Len() {
		snaps, err := r.At(i)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range snaps {
			for _, l := range s.Locks {
				if strings.Contains(l.Session().Query, literal) {
					t.Fatalf("the recording holds the literal: %q", l.Session().Query)
				}
				seen = seen || strings.Contains(l.Session().Query, "pg_advisory_lock($1, $2)")
			}
		}
	}
	if !seen {
		t.Error("the recording has no normalized query of the holder")
	}
}

// --query-text none leaves the query out; a bad mode or a web config
// without --http is bad usage.
func TestQueryTextFlag(t *testing.T) {
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock(1, 8182), 'x@y.z' AS email"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runServe(ctx, []string{"--dsn", pgtest.DSN(t), "--http", "127.0.0.1:0", "--interval", "100ms", "--query-text", "none"}, &stdout, &stderr)
	}()
	base := waitURL(t, &stdout, errc)
	code, body := httpGet(t, base+"/api/locks")
	if code != http.StatusOK || strings.Contains(string(body), "pg_advisory_lock(") || !strings.Contains(string(body), "8182") {
		t.Errorf("/api/locks with --query-text none: %d\n%s", code, body)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("serve: %v", err)
	}
	expectExit(t, []string{"serve", "--dsn", pgtest.DSN(t), "--http", "127.0.0.1:0", "--query-text", "some"}, exitUsage, "full, normalized, none", "")
	expectExit(t, []string{"record", "--dsn", pgtest.DSN(t), "--out", filepath.Join(t.TempDir(), "r"), "--query-text", "all"}, exitUsage, "--query-text", "")
	web := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(web, []byte("basic_auth_users:\n  ops: notahash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expectExit(t, []string{"serve", "--dsn", pgtest.DSN(t), "--http", "127.0.0.1:0", "--web.config.file", web}, exitUsage, "--web.config.file", "")
}

// A running serve whose web config asks for client certificates refuses a
// client without one at the handshake and answers one that presents it.
func TestServeRequiresClientCertificate(t *testing.T) {
	ca := testca.New(t)
	web := filepath.Join(t.TempDir(), "web.yml")
	config := "tls_server_config:\n  cert_file: " + ca.CertFile + "\n  key_file: " + ca.KeyFile +
		"\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: " + ca.CAFile + "\n"
	if err := os.WriteFile(web, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runServe(ctx, []string{"--dsn", pgtest.DSN(t), "--http", "127.0.0.1:0", "--interval", "100ms", "--web.config.file", web}, &stdout, &stderr)
	}()
	u, err := url.Parse(waitURL(t, &stdout, errc))
	if err != nil {
		t.Fatal(err)
	}
	base := "https://127.0.0.1:" + u.Port() + "/api/locks"
	without := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.Client(false)}}
	if resp, err := without.Get(base); err == nil {
		resp.Body.Close()
		t.Errorf("no client certificate: %d, want a refused handshake", resp.StatusCode)
	}
	with := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.Client(true)}}
	resp, err := with.Get(base)
	if err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with the client certificate: %d, want 200", resp.StatusCode)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
