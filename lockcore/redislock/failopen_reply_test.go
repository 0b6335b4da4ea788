package redislock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// The package doc promises that BUSY and READONLY replies, like OOM, fail
// closed even with FailOpen: a Redis that answers is up, and another holder
// may hold the key. These check it against a real server.

// BUSY: a long read-only script runs past busy-reply-threshold, so every
// other command is answered BUSY until SCRIPT KILL.
func TestFailOpenNotOnBusyReply(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	holder := lockerOn(t, rdb, Options{Owner: "holder"})
	open := lockerOn(t, rdb, Options{Owner: "open", FailOpen: true, Wait: replyWait})
	ctx := context.Background()
	if _, err := holder.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	makeBusy(t, srv)
	ran := false
	err := open.With(ctx, "k", func(context.Context) error { ran = true; return nil })
	if ran || err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "BUSY") {
		t.Errorf("With (FailOpen) while another holds the key and Redis answers BUSY: ran %v, err %v; want the BUSY reply, fn not run", ran, err)
	}
	if n := open.Stats().FailOpen; n != 0 {
		t.Errorf("FailOpen counted %d", n)
	}
}

// READONLY: the server is demoted to a replica (of a master that cannot be
// reached, so it keeps its dataset and the holder's key) and refuses writes.
func TestFailOpenNotOnReadOnlyReply(t *testing.T) {
	srv := redistest.Private(t)
	rdb := redistest.ClientOf(t, srv)
	holder := lockerOn(t, rdb, Options{Owner: "holder"})
	open := lockerOn(t, rdb, Options{Owner: "open", FailOpen: true, Wait: replyWait})
	ctx := context.Background()
	if _, err := holder.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer rdb.Do(context.Background(), "REPLICAOF", "NO", "ONE")
	ran := false
	err := open.With(ctx, "k", func(context.Context) error { ran = true; return nil })
	if ran || err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "READONLY") {
		t.Errorf("With (FailOpen) while another holds the key and Redis answers READONLY: ran %v, err %v; want the READONLY reply, fn not run", ran, err)
	}
	if n := open.Stats().FailOpen; n != 0 {
		t.Errorf("FailOpen counted %d", n)
	}
}

// The one error reply FailOpen opens on (README: "too many clients"):
// a Redis at its maxclients refuses every new connection with "ERR max
// number of clients reached", and cannot be reached by this Locker any
// more than one that is down (the refusal reaches go-redis as that reply
// or, the server having closed the connection, as a broken pipe, which
// go-redis retries until the wait ends). With runs fn unprotected and counts it; a
// plain Acquire reports ErrUnavailable.
func TestFailOpenOnMaxClients(t *testing.T) {
	srv := redistest.Private(t)
	admin := redistest.ClientOf(t, srv)
	ctx := context.Background()
	if err := admin.Ping(ctx).Err(); err != nil { // the admin's connection, before the limit
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxclients", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.ConfigSet(ctx, "maxclients", "10000")
	open := lockerOn(t, redistest.ClientOf(t, srv), Options{Owner: "open", FailOpen: true, Wait: 200 * time.Millisecond})
	_, err := open.Acquire(ctx, "k")
	t.Logf("Acquire: %v", err)
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("Acquire on a Redis at maxclients: %v, want ErrUnavailable", err)
	}
	ran := false
	if err := open.With(ctx, "k", func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("With (FailOpen) on a Redis at maxclients: ran %v, err %v; want fn run", ran, err)
	}
	if n := open.Stats().FailOpen; n != 1 {
		t.Errorf("FailOpen counted %d, want 1", n)
	}
}
