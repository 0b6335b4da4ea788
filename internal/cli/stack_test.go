package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/record/recording"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/model"
)

// Two Stacks side by side, as a fleet opens one per server: each has its
// own sources, recording and endpoints, closing one leaves the other
// working, and Close is safe to call twice.
func TestStacksSideBySide(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 8123)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ln, err := listenHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a, err := OpenStack(ctx, StackConfig{DSN: dsn, Interval: 100 * time.Millisecond, Listener: ln, Record: filepath.Join(dir, "a.rec"),
		Sources: SourceConfig{Redis: redistest.Private(t).URL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenStack(ctx, StackConfig{DSN: dsn, Interval: 100 * time.Millisecond, Record: filepath.Join(dir, "b.rec")})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := len(a.Sources()); got != 2 { // redis, lease
		t.Fatalf("a has %d other sources, want 2 (redis, lease)", got)
	}
	if got := len(b.Sources()); got != 1 { // lease
		t.Fatalf("b has %d other sources, want 1 (lease)", got)
	}
	if a.Observers() == nil || b.Observers() != nil {
		t.Errorf("observers: a (serving) %v, b (not) %v", a.Observers(), b.Observers())
	}

	// The owner polls; the endpoints serve that poll, the file records it.
	for _, st := range []*Stack{a, b} {
		s, err := st.Server().Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !hasAgent(s.Locks, 8123) {
			t.Fatalf("the poll misses AGENT 8123: %+v", s.Locks)
		}
		for _, o := range st.Sources() {
			if _, err := o.Poll(ctx); err != nil {
				t.Fatalf("%s: %v", o.Name(), err)
			}
		}
	}
	code, body := httpGet(t, "http://"+ln.Addr().String()+"/api/advisory-locks")
	if code != http.StatusOK || !strings.Contains(string(body), `"AGENT 8123"`) {
		t.Fatalf("/api/advisory-locks: %d %s", code, body)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := a.Server().Poll(ctx); err != nil {
		t.Fatalf("a after b closed: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("a still listens after Close")
	}
	for name, want := range map[string][]string{"a.rec": {primarySource, "redis", "lease"}, "b.rec": {primarySource, "lease"}} {
		r, err := recording.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Header.Sources; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s sources %q, want %q", name, got, want)
		}
		snap, err := r.Merged(r.Len() - 1)
		if err != nil || !hasAgent(snap.Locks, 8123) {
			t.Errorf("%s: the recorded snapshot misses AGENT 8123 (%v)", name, err)
		}
	}
}

// A Stack that cannot open closes what it had opened, its listener too,
// and says why in one line without the password, exit code 2.
func TestStackOpenFails(t *testing.T) {
	ln, err := listenHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dsn := "postgres://me:s3cret-pw@/x?host=/nonexistent-locktop&connect_timeout=2"
	_, err = OpenStack(context.Background(), StackConfig{DSN: dsn, Interval: time.Second, Listener: ln})
	if err == nil {
		t.Fatal("opened a stack on a server that does not exist")
	}
	if strings.Contains(err.Error(), "s3cret-pw") || report(err, io.Discard) != exitUsage {
		t.Errorf("error %q, exit %d", err, report(err, io.Discard))
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the listener is still open: Accept says %v", err)
	}

	// A recording that exists is never overwritten; the monitor opened
	// before it is closed again.
	path := filepath.Join(t.TempDir(), "x.rec")
	st, err := OpenStack(context.Background(), StackConfig{DSN: pgtest.DSN(t), Interval: time.Second, Record: path})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := OpenStack(context.Background(), StackConfig{DSN: pgtest.DSN(t), Interval: time.Second, Record: path}); report(err, io.Discard) != exitUsage || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second recording to %s: %v", path, err)
	}
}

// A Stack that polls by itself (serve) keeps the endpoints fresh and
// records every source, until its context ends.
func TestStackPolls(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 8124)"); err != nil {
		t.Fatal(err)
	}
	ln, err := listenHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "poll.rec")
	st, err := OpenStack(ctx, StackConfig{DSN: pgtest.DSN(t), Interval: 100 * time.Millisecond, Listener: ln, Poll: true, Record: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	header := st.RecordedBytes() // Run has not polled yet
	ran := make(chan error, 1)
	go func() { ran <- st.Run(ctx) }()
	// The server's answer, recorded without a request (the lease source's
	// may come first).
	pgtest.Eventually(t, "the recording of the server's locks", func() bool {
		if st.RecordedBytes() <= header {
			return false
		}
		r, err := recording.Open(path)
		if err != nil {
			return false
		}
		defer r.Close()
		for i := range r.Len() {
			if s, err := r.Merged(i); err == nil && r.Source(i) == 0 && hasAgent(s.Locks, 8124) {
				return true
			}
		}
		return false
	})
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := recording.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := r.Merged(r.Len() - 1)
	if err != nil || !hasAgent(snap.Locks, 8124) {
		t.Errorf("the recorded snapshot misses AGENT 8124 (%v)", err)
	}
	if strings.Join(r.Header.Sources, ",") != primarySource+",lease" {
		t.Errorf("sources %q", r.Header.Sources)
	}
}

// hasAgent reports whether locks hold the advisory lock AGENT id.
func hasAgent(locks []model.Lock, id int64) bool {
	for _, l := range locks {
		if l.Namespace == "AGENT" && l.EntityID == id && l.Granted {
			return true
		}
	}
	return false
}
