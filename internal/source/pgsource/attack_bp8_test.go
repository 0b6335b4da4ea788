package pgsource_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// Attack test (bp8) on a Monitor keeping sessions and arrays from poll to
// poll (pglocks.Reader, backends.prev): a snapshot is its holder's for
// good. The dashboard keeps the last poll's to diff the next against
// (new waits, ended sessions), the recorder and the HTTP API keep theirs
// while later polls run. So a snapshot taken before sessions change
// (query text, state, a transaction's start, a heavyweight wait that is
// granted, a lock released, a session ended) must read the same after
// the polls that see the changes.
func TestAttackSnapshotUnchangedByLaterPolls(t *testing.T) {
	ctx := context.Background()
	m := connect(t, pgtest.DSN(t))
	holder, waiter, busy, ending := pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t), pgtest.Conn(t)
	table := fmt.Sprintf("bp8_attack_%d", time.Now().UnixNano())
	if _, err := holder.Exec(ctx, "CREATE TABLE "+table+" (id int)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the sessions close: a failure may leave the holder's transaction open
		c := pgtest.Conn(t)
		_, _ = c.Exec(context.Background(), "SET lock_timeout = '5s'")
		_, _ = c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
	})
	var waiterPID, busyPID, endingPID int32
	if err := waiter.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&waiterPID); err != nil {
		t.Fatal(err)
	}
	if err := busy.QueryRow(ctx, "SELECT pg_backend_pid() FROM pg_advisory_lock(4246, 1)").Scan(&busyPID); err != nil {
		t.Fatal(err)
	}
	if err := ending.QueryRow(ctx, "SELECT pg_backend_pid() FROM pg_advisory_lock(4246, 2)").Scan(&endingPID); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE", "SELECT pg_advisory_xact_lock(4246, 3)"} {
		if _, err := holder.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(ctx, "BEGIN; LOCK TABLE "+table+" IN ACCESS SHARE MODE; COMMIT")
		waited <- err
	}()
	var first model.Snapshot
	pgtest.Eventually(t, "a poll to show the heavyweight wait", func() bool {
		s, err := m.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first = s
		for _, l := range s.Locks {
			if l.PID == waiterPID && !l.Granted {
				return true
			}
		}
		return false
	})
	before := marshal(t, first)

	// The changes: a new statement, a transaction begun (state and
	// xact_start), the wait granted, the holder's transaction ended, a
	// session ended.
	if _, err := busy.Exec(ctx, "SELECT 'bp8 busy ran this'"); err != nil {
		t.Fatal(err)
	}
	second, err := m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	afterFirst := marshal(t, second)
	for _, q := range []string{"BEGIN", "SELECT 'bp8 busy in a transaction'"} {
		if _, err := busy.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter not granted 30s after the holder committed")
	}
	ending.Close(ctx)
	pgtest.Eventually(t, "the polls to see the changes", func() bool {
		s, err := m.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sawBusy, sawEnding := false, false
		for _, l := range s.Locks {
			sawBusy = sawBusy || (l.PID == busyPID && strings.Contains(l.Session().Query, "in a transaction"))
			sawEnding = sawEnding || l.PID == endingPID
		}
		return sawBusy && !sawEnding
	})
	if _, err := m.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if after := marshal(t, first); !bytes.Equal(before, after) {
		t.Errorf("the first snapshot changed under later polls:\nbefore %s\nafter  %s", before, after)
	}
	if after := marshal(t, second); !bytes.Equal(afterFirst, after) {
		t.Errorf("the second snapshot changed under later polls:\nbefore %s\nafter  %s", afterFirst, after)
	}
	_, _ = busy.Exec(ctx, "COMMIT")
}

// marshal is s as JSON, a deep copy of what it shows (the Locks' Backends
// included).
func marshal(t *testing.T, s model.Snapshot) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
