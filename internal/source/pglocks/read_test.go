package pglocks_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// Read works out who blocks each waiter from the rows themselves, the
// way pg_blocking_pids() does: on a relation held in AccessShare (A) and
// Share (B) modes, a RowExclusive waiter (C) is blocked by B only (A's mode
// does not conflict: a rule naming every holder would name A); a Share
// waiter (D) is blocked by no holder but queues behind C, whose wanted
// mode conflicts with its own (a rule naming conflicting holders only
// would name nobody); an AccessExclusive waiter (E) is blocked by all four.
// Each set is compared with the server's own pg_blocking_pids().
func TestReadLocksBlockedBy(t *testing.T) {
	ctx := context.Background()
	mon := pgtest.Conn(t)
	if _, err := mon.Exec(ctx, "CREATE TABLE blockers_rel (id int)"); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int32{}
	hold := func(name, mode string) {
		c := pgtest.Conn(t)
		var pid int32
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids[name] = pid
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		if _, err := tx.Exec(ctx, "LOCK TABLE blockers_rel IN "+mode+" MODE"); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(name, mode string) {
		c := pgtest.Conn(t)
		var pid int32
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids[name] = pid
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = c.Exec(wctx, "BEGIN; LOCK TABLE blockers_rel IN "+mode+" MODE; COMMIT")
		}()
		t.Cleanup(func() { cancel(); <-done })
		// Queue order is arrival order: wait until this one is queued
		// before the next one arrives.
		pgtest.Eventually(t, name+" waits", func() bool {
			var n int
			if err := mon.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", pid).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0
		})
	}
	hold("A", "ACCESS SHARE")
	hold("B", "SHARE")
	wait("C", "ROW EXCLUSIVE")
	wait("D", "SHARE")
	wait("E", "ACCESS EXCLUSIVE")
	adv := pgtest.Conn(t) // advisory rows too, for the text-format read below
	if _, err := adv.Exec(ctx, "SELECT pg_advisory_lock(5, -7), pg_advisory_lock_shared(-9000000000)"); err != nil {
		t.Fatal(err)
	}

	server := map[int32][]int32{}
	rows, err := mon.Query(ctx, "SELECT pid, pg_blocking_pids(pid) FROM pg_locks WHERE NOT granted AND relation = 'blockers_rel'::regclass")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var pid int32
		var by []int32
		if err := rows.Scan(&pid, &by); err != nil {
			t.Fatal(err)
		}
		slices.Sort(by)
		server[pid] = slices.Compact(by)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	table, err := pglocks.Read(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	names := func(by []int32) string {
		var out []string
		for _, p := range by {
			for n, q := range pids {
				if q == p {
					out = append(out, n)
				}
			}
		}
		slices.Sort(out)
		return fmt.Sprint(out)
	}
	want := map[string]string{"C": "[B]", "D": "[C]", "E": "[A B C D]"}
	seen := 0
	for _, o := range table.Others {
		if o.Granted || o.Relation != "public.blockers_rel" {
			continue
		}
		seen++
		by := slices.Clone(o.BlockedBy)
		slices.Sort(by)
		if !slices.Equal(by, server[o.PID]) {
			t.Errorf("pid %d: BlockedBy %s, pg_blocking_pids %s", o.PID, names(by), names(server[o.PID]))
		}
		for n, w := range want {
			if pids[n] == o.PID && names(by) != w {
				t.Errorf("%s: BlockedBy %s, want %s", n, names(by), w)
			}
		}
	}
	if seen != 3 {
		t.Errorf("Read saw %d waiters on blockers_rel, want 3: %+v", seen, table.Others)
	}

	// The same rows when the server sends them as text (the simple
	// protocol, as a pooler may impose), which Read leaves to pgx's
	// Scan instead of decoding the binary format itself.
	cfg := mon.Config().Copy()
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	text, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close(ctx)
	again, err := pglocks.Read(ctx, text)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dumpTable(again), dumpTable(table); got != want {
		t.Errorf("read as text:\n%s\nread as binary:\n%s", got, want)
	}
	if again.Connections != table.Connections+1 {
		t.Errorf("read as text: %d connections, as binary %d (one fewer)", again.Connections, table.Connections)
	}
}

// dumpTable is every field Read fills in, as text, times in UTC.
func dumpTable(t pglocks.Table) string {
	var b strings.Builder
	at := func(ts time.Time) string { return ts.UTC().Format(time.RFC3339Nano) }
	be := func(k *pglocks.Backend) string {
		return fmt.Sprintf("%s|%s|%s|%s|%s|%s|%s|%s", k.User, k.Application, k.ClientAddr, k.State, k.Query, at(k.QueryStart), at(k.StateChange), at(k.XactStart))
	}
	for _, r := range t.Rows {
		fmt.Fprintf(&b, "%v %s %d %v %v %s %s\n", r.Key, r.Database, r.PID, r.Share, r.Granted, at(r.WaitStart), be(r.Backend))
	}
	for _, o := range t.Others {
		fmt.Fprintf(&b, "%s %s %s %d/%d %s %s %d %s %v %s %v %s\n", o.LockType, o.Database, o.Relation, o.DatabaseOID, o.RelationOID,
			o.Tuple, o.Object, o.PID, o.Mode, o.Granted, at(o.WaitStart), o.BlockedBy, be(o.Backend))
	}
	pids := slices.Sorted(maps.Keys(t.Backends))
	for _, p := range pids {
		fmt.Fprintf(&b, "%d %s\n", p, be(t.Backends[p]))
	}
	return b.String()
}
