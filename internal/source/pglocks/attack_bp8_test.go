package pglocks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// Attack test (bp8): a session whose state changes while its query text
// does not (a statement that ends: active, then idle, the same text) is a
// changed session: a new *Backend, and the one the earlier read gave is
// left as it was.
func TestAttackReaderStateChangeSameQuery(t *testing.T) {
	ctx := context.Background()
	sess, mon := pgtest.Conn(t), pgtest.Conn(t)
	var pid int32
	if err := sess.QueryRow(ctx, "SELECT pg_backend_pid() FROM pg_advisory_lock(4247, 1)").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT pg_sleep(1.5) /* bp8 */"
	done := make(chan error, 1)
	go func() {
		_, err := sess.Exec(ctx, q)
		done <- err
	}()
	var rd pglocks.Reader
	var active *pglocks.Backend
	pgtest.Eventually(t, "a read to show the session active in its statement", func() bool {
		tab, err := rd.Read(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		b := tab.Backends[pid]
		if b != nil && b.State == "active" && strings.Contains(b.Query, "bp8") {
			active = b
			return true
		}
		return false
	})
	was := *active
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var idle *pglocks.Backend
	pgtest.Eventually(t, "a read to show the session idle", func() bool {
		tab, err := rd.Read(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		idle = tab.Backends[pid]
		return idle != nil && idle.State == "idle"
	})
	if idle == active {
		t.Errorf("the session that went idle kept its *Backend: %+v", idle)
	}
	if idle.Query != was.Query {
		t.Errorf("query %q, want the same text %q", idle.Query, was.Query)
	}
	if *active != was {
		t.Errorf("the earlier read's session was written since: %+v, was %+v", *active, was)
	}
}
