package pgsource_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source/pglocks"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// The case of the issue: A and B hold a shared advisory lock, B asks for it
// exclusively. pg_blocking_pids(B) is {A}; B must not be its own blocker.
func TestInspectUpgradeIsNotItsOwnBlocker(t *testing.T) {
	mon := pgtest.Conn(t)
	ctx := context.Background()
	a := pgtest.Conn(t)
	if _, err := a.Exec(ctx, "SELECT pg_advisory_lock_shared(1, 5)"); err != nil {
		t.Fatal(err)
	}
	var pa int32
	if err := a.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pa); err != nil {
		t.Fatal(err)
	}
	b := pgtest.Conn(t)
	if _, err := b.Exec(ctx, "SELECT pg_advisory_lock_shared(1, 5)"); err != nil {
		t.Fatal(err)
	}
	pb := blockedOn(t, mon, b, "SELECT pg_advisory_lock(1, 5)")
	snap, err := pgsource.Inspect(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range snap.Locks {
		if l.PID == pb && !l.Granted && !slices.Equal(l.BlockedBy, []int32{pa}) {
			t.Errorf("B's waiting row is blocked by %v, want [%d] (A alone, as pg_blocking_pids says)", l.BlockedBy, pa)
		}
	}
}

// blockedOn runs sql on c, where it is expected to wait, and returns c's
// pid once the server shows it waiting for a lock.
func blockedOn(t *testing.T, mon, c *pgx.Conn, sql string) int32 {
	t.Helper()
	var pid int32
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Exec(ctx, sql)
	}()
	t.Cleanup(func() { cancel(); <-done })
	pgtest.Eventually(t, "the session waits", func() bool { return waitsForLock(t, mon, pid) })
	return pid
}

func waitsForLock(t *testing.T, mon *pgx.Conn, pid int32) bool {
	t.Helper()
	var waiting bool
	if err := mon.QueryRow(context.Background(), "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	return waiting
}

// Every blocker Inspect names is checked against pg_blocking_pids() on
// random workloads: sessions in open transactions take row locks, relation
// locks in every mode and advisory locks shared and exclusive, in queues
// and upgrades, until every session waits or a round's steps run out; then,
// with the lock table still, each waiter's BlockedBy must
//   - never name the waiter itself;
//   - name every session that holds the same object in a conflicting mode
//     (bar the head of a row's queue, which holds the tuple lock while it
//     waits for the row's transaction: the queue shows that transaction);
//   - name no one pg_blocking_pids() does not reach, directly or through
//     the sessions it names (the documented difference: the holder named
//     instead of an earlier waiter);
//   - be empty only when pg_blocking_pids() is.
//
// Parallel with TestPollAfterRestart (a server of its own) only: the
// package's other tests run before, so no other session's locks interleave.
func TestInspectBlockersMatchServer(t *testing.T) {
	t.Parallel()
	mon := pgtest.Conn(t)
	ctx := context.Background()
	rb := table("rb")
	if _, err := mon.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s_a (id int); CREATE TABLE %[1]s_b (id int);
		CREATE TABLE %[1]s_rows (id int PRIMARY KEY, v int); INSERT INTO %[1]s_rows SELECT g, 0 FROM generate_series(1, 2) g`, rb)); err != nil {
		t.Fatal(err)
	}
	modes := []string{"ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE", "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE"}
	ops := []func(r *rand.Rand) string{
		func(r *rand.Rand) string {
			return fmt.Sprintf("LOCK TABLE %s_%c IN %s MODE", rb, 'a'+rune(r.IntN(2)), modes[r.IntN(len(modes))])
		},
		func(r *rand.Rand) string {
			strength := []string{"FOR UPDATE", "FOR NO KEY UPDATE", "FOR SHARE", "FOR KEY SHARE"}[r.IntN(4)]
			return fmt.Sprintf("SELECT * FROM %s_rows WHERE id = %d %s", rb, 1+r.IntN(2), strength)
		},
		func(r *rand.Rand) string {
			return fmt.Sprintf("UPDATE %s_rows SET v = v + 1 WHERE id = %d", rb, 1+r.IntN(2))
		},
		func(r *rand.Rand) string {
			fn := []string{"pg_advisory_xact_lock", "pg_advisory_xact_lock_shared"}[r.IntN(2)]
			return fmt.Sprintf("SELECT %s(1, %d)", fn, 5+r.IntN(2)/max(r.IntN(3), 1))
		},
	}
	ops = append(ops, ops[len(ops)-1]) // advisory locks twice as often: their queues and upgrades
	const rounds = 80
	// The rounds share their sessions (a round uses 3 to 6 of them):
	// connecting anew each round was most of the test's time.
	var sessions [6]*session
	for i := range sessions {
		sessions[i] = connectSession(t)
	}
	checked := 0
	for round := range rounds {
		r := rand.New(rand.NewPCG(uint64(round), 20))
		checked += blockerRound(t, mon, sessions[:], r, ops)
	}
	t.Logf("%d waiters checked in %d rounds", checked, rounds)
	if checked < rounds {
		t.Errorf("only %d waiters checked in %d rounds: the workload hardly waits", checked, rounds)
	}
}

type session struct {
	c       *pgx.Conn
	pid     int32
	done    chan struct{} // the running statement ended; nil when none runs
	history []string
}

// connectSession opens a session of the workload, closed with the test.
func connectSession(t *testing.T) *session {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	s := &session{c: c}
	// A deadlock stays put while it is checked, instead of ending after a second.
	if _, err := c.Exec(ctx, "SET deadlock_timeout = '1h'"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&s.pid); err != nil {
		t.Fatal(err)
	}
	return s
}

// blockerRound runs one random workload on some of the sessions and checks
// its waiters; it returns how many it checked. It leaves the sessions idle,
// out of any transaction.
func blockerRound(t *testing.T, mon *pgx.Conn, all []*session, r *rand.Rand, ops []func(*rand.Rand) string) int {
	t.Helper()
	ctx := context.Background()
	sessions := all[:3+r.IntN(4)]
	defer endRound(t, mon, sessions)
	for _, s := range sessions {
		s.history = nil
		if _, err := s.c.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 + r.IntN(8) {
		var free []*session
		for _, s := range sessions {
			if s.done == nil {
				free = append(free, s)
			}
		}
		if len(free) == 0 {
			break
		}
		s := free[r.IntN(len(free))]
		sql := ops[r.IntN(len(ops))](r)
		s.history = append(s.history, sql)
		done := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			defer close(done)
			_, err := s.c.Exec(ctx, sql)
			errc <- err
		}()
		// Granted, or waiting.
		deadline := time.Now().Add(20 * time.Second)
		for {
			select {
			case <-done:
				if err := <-errc; err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
				done = nil
			default:
			}
			if done == nil || waitsForLock(t, mon, s.pid) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s neither ran nor waited", sql)
			}
			time.Sleep(2 * time.Millisecond)
		}
		s.done = done
	}

	pids := make([]int32, len(sessions))
	for i, s := range sessions {
		pids[i] = s.pid
	}
	before := blockingPIDs(t, mon, pids)
	snap, err := pgsource.Inspect(ctx, mon)
	if err != nil {
		t.Fatal(err)
	}
	hard := hardBlockers(t, mon, pids)
	if after := blockingPIDs(t, mon, pids); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the lock table moved while it was checked: %v, then %v", before, after)
	}
	var story strings.Builder
	for _, s := range sessions {
		fmt.Fprintf(&story, "\n  %d: %s", s.pid, strings.Join(s.history, "; "))
	}
	checked := 0
	for _, l := range snap.Locks {
		if l.Granted || !slices.Contains(pids, l.PID) {
			continue
		}
		checked++
		w, by := l.PID, l.BlockedBy
		reach := reachable(before, w)
		switch {
		case slices.Contains(by, w):
			t.Errorf("%s %s: %d is named its own blocker %v%s", l.KeyLabel(), l.Mode, w, by, story.String())
		case len(by) == 0 && len(before[w]) > 0:
			t.Errorf("%s %s: %d is blocked by nobody, pg_blocking_pids says %v%s", l.KeyLabel(), l.Mode, w, before[w], story.String())
		}
		for _, p := range by {
			if !slices.Contains(reach, p) {
				t.Errorf("%s %s: %d is blocked by %v; %d is not among %v, whom pg_blocking_pids reaches%s", l.KeyLabel(), l.Mode, w, by, p, reach, story.String())
			}
		}
		for _, p := range hard[w] {
			if !slices.Contains(by, p) {
				t.Errorf("%s %s: %d is blocked by %v, leaving out %d, which holds it in a conflicting mode%s", l.KeyLabel(), l.Mode, w, by, p, story.String())
			}
		}
	}
	return checked
}

// endRound ends the statements still waiting, on the server
// (pg_cancel_backend: a cancelled context would close the connection), and
// rolls every session's transaction back. A cancel that finds its
// statement already over finds the session idle, which ignores it.
func endRound(t *testing.T, mon *pgx.Conn, sessions []*session) {
	t.Helper()
	ctx := context.Background()
	for _, s := range sessions {
		if s.done != nil {
			if _, err := mon.Exec(ctx, "SELECT pg_cancel_backend($1)", s.pid); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range sessions {
		if s.done != nil {
			<-s.done
			s.done = nil
		}
	}
	for _, s := range sessions {
		if _, err := s.c.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatalf("rolling back %d: %v", s.pid, err)
		}
	}
}

// blockingPIDs is pg_blocking_pids() of each pid that waits.
func blockingPIDs(t *testing.T, mon *pgx.Conn, pids []int32) map[int32][]int32 {
	t.Helper()
	rows, err := mon.Query(context.Background(), "SELECT pid, pg_blocking_pids(pid) FROM unnest($1::int4[]) pid", pids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32][]int32{}
	for rows.Next() {
		var pid int32
		var by []int32
		if err := rows.Scan(&pid, &by); err != nil {
			t.Fatal(err)
		}
		if len(by) > 0 {
			slices.Sort(by)
			out[pid] = by
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// reachable is every pid pg_blocking_pids() reaches from w, directly or
// through the pids it names.
func reachable(by map[int32][]int32, w int32) []int32 {
	var out []int32
	next := slices.Clone(by[w])
	for len(next) > 0 {
		p := next[0]
		next = next[1:]
		if slices.Contains(out, p) {
			continue
		}
		out = append(out, p)
		next = append(next, by[p]...)
	}
	return out
}

// hardBlockers is, for each waiting pid, the other sessions holding the
// object it waits for in a conflicting mode, read straight from pg_locks;
// the head of a row's queue (a tuple lock holder waiting for a
// transaction) is left out.
func hardBlockers(t *testing.T, mon *pgx.Conn, pids []int32) map[int32][]int32 {
	t.Helper()
	rows, err := mon.Query(context.Background(), `SELECT w.pid, w.mode, h.pid, h.mode,
		h.locktype = 'tuple' AND EXISTS (SELECT 1 FROM pg_locks x WHERE x.pid = h.pid AND NOT x.granted AND x.locktype = 'transactionid')
		FROM pg_locks w JOIN pg_locks h ON h.granted AND h.pid <> w.pid
			AND h.locktype = w.locktype AND h.database IS NOT DISTINCT FROM w.database AND h.relation IS NOT DISTINCT FROM w.relation
			AND h.page IS NOT DISTINCT FROM w.page AND h.tuple IS NOT DISTINCT FROM w.tuple
			AND h.transactionid IS NOT DISTINCT FROM w.transactionid AND h.virtualxid IS NOT DISTINCT FROM w.virtualxid
			AND h.classid IS NOT DISTINCT FROM w.classid AND h.objid IS NOT DISTINCT FROM w.objid AND h.objsubid IS NOT DISTINCT FROM w.objsubid
		WHERE NOT w.granted AND w.pid = ANY($1)`, pids)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32][]int32{}
	for rows.Next() {
		var w, h int32
		var wm, hm string
		var head bool
		if err := rows.Scan(&w, &wm, &h, &hm, &head); err != nil {
			t.Fatal(err)
		}
		if !head && pglocks.ModesConflict(hm, wm) && !slices.Contains(out[w], h) {
			out[w] = append(out[w], h)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
