package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
)

// Ending the context stops new connections at once and lets a request in
// flight finish; then ServeListener returns nil.
func TestServeShutsDownGracefully(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	ln, err := httpapi.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpapi.ServeListener(ctx, ln, h) }()

	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	<-entered
	cancel()
	// The listener closes while the request is still running.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after the context ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("ServeListener returned (%v) with a request in flight", err)
	default:
	}
	close(release)
	if r := <-got; r.err != nil || r.body != "finished" {
		t.Errorf("request in flight: %q, %v", r.body, r.err)
	}
	if err := <-served; err != nil {
		t.Errorf("ServeListener: %v", err)
	}
}

func TestListen(t *testing.T) {
	for _, bad := range []string{"nonsense", "127.0.0.1", "127.0.0.1:", "no.such.host.invalid:80"} {
		_, err := httpapi.Listen(bad)
		var ae *httpapi.AddrError
		if !errors.As(err, &ae) {
			t.Errorf("Listen(%q): %v (%T), want an AddrError", bad, err, err)
		}
	}
	ln, err := httpapi.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !httpapi.IsLoopback(ln.Addr()) {
		t.Errorf("%s is not loopback", ln.Addr())
	}
	// A port in use is not bad usage: the listener's own error.
	_, err = httpapi.Listen(ln.Addr().String())
	var ae *httpapi.AddrError
	if err == nil || errors.As(err, &ae) {
		t.Errorf("port in use: %v", err)
	}
	if httpapi.IsLoopback(&net.TCPAddr{IP: net.IPv4zero, Port: 1}) {
		t.Error("0.0.0.0 counted as loopback")
	}
	if h, _, _ := net.SplitHostPort(httpapi.DefaultAddr); !net.ParseIP(h).IsLoopback() {
		t.Errorf("DefaultAddr %s is not loopback", httpapi.DefaultAddr)
	}
}
