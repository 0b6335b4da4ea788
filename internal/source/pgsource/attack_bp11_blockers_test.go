//go:build attack

package pgsource_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

// Attack tests (bp11) on blockers by counting sort, BlockedBy cut from one
// capped array, interned texts and bound walking each key's run
// (b920b7b, f26b292, c512ef9, ab38155), against a real server: who blocks
// whom as a Monitor polls it, compared with pg_blocking_pids(), with the
// sessions split over two databases that hold the same advisory keys and
// tables of the same name (the same key in two databases is two keys).

func connectSessionTo(t *testing.T, dsn string) *session {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	s := &session{c: c}
	if _, err := c.Exec(ctx, "SET deadlock_timeout = '1h'"); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&s.pid); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAttackMonitorBlockersTwoDatabases(t *testing.T) {
	ctx := context.Background()
	dsn1 := pgtest.DSN(t)
	dsn2 := pgtest.Database(t, "bp11_other")
	mon := pgtest.Conn(t)
	m := connect(t, dsn1)
	rb := table("bp11")
	for _, dsn := range []string{dsn1, dsn2} {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s_a (id int);
			CREATE TABLE %[1]s_rows (id int PRIMARY KEY, v int); INSERT INTO %[1]s_rows SELECT g, 0 FROM generate_series(1, 2) g`, rb)); err != nil {
			t.Fatal(err)
		}
		c.Close(ctx)
	}
	modes := []string{"ACCESS SHARE", "ROW EXCLUSIVE", "SHARE", "EXCLUSIVE", "ACCESS EXCLUSIVE"}
	ops := []func(r *rand.Rand) string{
		func(r *rand.Rand) string {
			return fmt.Sprintf("LOCK TABLE %s_a IN %s MODE", rb, modes[r.IntN(len(modes))])
		},
		func(r *rand.Rand) string {
			strength := []string{"FOR UPDATE", "FOR SHARE", "FOR KEY SHARE"}[r.IntN(3)]
			return fmt.Sprintf("SELECT * FROM %s_rows WHERE id = %d %s", rb, 1+r.IntN(2), strength)
		},
		func(r *rand.Rand) string {
			return fmt.Sprintf("UPDATE %s_rows SET v = v + 1 WHERE id = %d", rb, 1+r.IntN(2))
		},
		func(r *rand.Rand) string {
			fn := []string{"pg_advisory_xact_lock", "pg_advisory_xact_lock_shared"}[r.IntN(2)]
			return fmt.Sprintf("SELECT %s(1177, %d)", fn, r.IntN(2))
		},
		func(r *rand.Rand) string {
			fn := []string{"pg_advisory_xact_lock", "pg_advisory_xact_lock_shared"}[r.IntN(2)]
			return fmt.Sprintf("SELECT %s(%d)", fn, 11770+r.IntN(2))
		},
	}
	var sessions [8]*session
	for i := range sessions {
		dsn := dsn1
		if i%2 == 1 {
			dsn = dsn2
		}
		sessions[i] = connectSessionTo(t, dsn)
	}
	checked := 0
	for round := range 120 {
		r := rand.New(rand.NewPCG(uint64(round), 1177))
		checked += monitorRound(t, mon, m, sessions[:], r, ops)
	}
	t.Logf("%d waiters checked", checked)
	if checked < 120 {
		t.Errorf("only %d waiters checked: the workload hardly waits", checked)
	}
}

// monitorRound is blockerRound with the snapshot a Monitor's polls (two,
// so that its first-seen blockers bound the held times), and checks that
// no row of one database names a blocker from the other.
func monitorRound(t *testing.T, mon *pgx.Conn, m *pgsource.Monitor, all []*session, r *rand.Rand, ops []func(*rand.Rand) string) int {
	t.Helper()
	ctx := context.Background()
	sessions := all[:4+r.IntN(5)]
	defer endRound(t, mon, sessions)
	// A poll with nothing waiting: the monitor forgets the last round's
	// waits, so that this round's are first seen by this round's polls.
	if _, err := m.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		s.history = nil
		if _, err := s.c.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 + r.IntN(8) {
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
	if _, err := m.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := m.Poll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hard := hardBlockers(t, mon, pids)
	if after := blockingPIDs(t, mon, pids); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the lock table moved while it was checked: %v, then %v", before, after)
	}
	var story strings.Builder
	dbOf := map[int32]string{}
	for i, s := range sessions {
		db := "one"
		if i%2 == 1 {
			db = "two"
		}
		dbOf[s.pid] = db
		fmt.Fprintf(&story, "\n  %d (%s): %s", s.pid, db, strings.Join(s.history, "; "))
	}
	checked := 0
	for i := range snap.Locks {
		l := &snap.Locks[i]
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
				t.Errorf("%s @%s %s: %d is blocked by %v; %d is not among %v, whom pg_blocking_pids reaches%s", l.KeyLabel(), l.Database, l.Mode, w, by, p, reach, story.String())
			}
			if dbOf[p] != "" && dbOf[p] != dbOf[w] {
				t.Errorf("%s: %d (%s) is blocked by %d of the other database%s", l.KeyLabel(), w, dbOf[w], p, story.String())
			}
		}
		for _, p := range hard[w] {
			if !slices.Contains(by, p) {
				t.Errorf("%s %s: %d is blocked by %v, leaving out %d, which holds it in a conflicting mode%s", l.KeyLabel(), l.Mode, w, by, p, story.String())
			}
		}
		// A caller appending to one waiter's blockers writes into no
		// other row's.
		if len(by) > 0 {
			others := snapshotBlockers(snap.Locks, i)
			l.BlockedBy = append(l.BlockedBy, -1, -2, -3)
			if now := snapshotBlockers(snap.Locks, i); now != others {
				t.Errorf("appending to %d's blockers changed other rows': %s, then %s", w, others, now)
			}
			l.BlockedBy = by
		}
	}
	// bound: a holder that blocks a waiter (first seen so, as both polls
	// saw it) in a conflicting mode was granted no later than the wait
	// began, the other holders of its key and of other keys are left
	// alone; no held time of a transaction's lock before the transaction.
	for i := range snap.Locks {
		w := &snap.Locks[i]
		if w.Granted || w.WaitStart.IsZero() || !slices.Contains(pids, w.PID) {
			continue
		}
		for j := range snap.Locks {
			h := &snap.Locks[j]
			if !h.Granted || !h.SameKey(w) || !slices.Contains(w.BlockedBy, h.PID) || !pglocks.ModesConflict(h.Mode, w.Mode) {
				continue
			}
			if h.HeldSince.IsZero() || h.HeldSince.After(w.WaitStart) {
				if x := h.Session().XactStart; h.Kind == model.KindAdvisory || x.IsZero() || !h.HeldSince.Equal(x) {
					t.Errorf("%s: %d holds it since %v, after %d began waiting for it at %v%s", h.KeyLabel(), h.PID, h.HeldSince, w.PID, w.WaitStart, story.String())
				}
			}
		}
	}
	for i := range snap.Locks {
		h := &snap.Locks[i]
		if x := h.Session().XactStart; h.Granted && h.Kind != model.KindAdvisory && !x.IsZero() && !h.HeldSince.IsZero() && h.HeldSince.Before(x) {
			t.Errorf("%s: %d holds it since %v, before its transaction began at %v", h.KeyLabel(), h.PID, h.HeldSince, x)
		}
	}
	// The rows of one key are together (bound and the table need it).
	seen := map[model.KeyID]int{}
	for i := range snap.Locks {
		k := snap.Locks[i].KeyID()
		if j, ok := seen[k]; ok && j != i-1 {
			t.Errorf("%s: rows %d and %d of one key are apart%s", snap.Locks[i].KeyLabel(), j, i, story.String())
		}
		seen[k] = i
	}
	return checked
}

func snapshotBlockers(locks []model.Lock, except int) string {
	var b strings.Builder
	for i := range locks {
		if i != except {
			fmt.Fprint(&b, locks[i].BlockedBy, locks[i].BlockedByOwners)
		}
	}
	return b.String()
}

// A relation renamed between polls shows its new name at once in the
// monitor's own database (the poll's interned texts): a waiter queued on it each time, the holder renaming it in its
// transaction and committing, then a new queue.
func TestAttackRenamedRelationOwnDatabase(t *testing.T) {
	renamedNotStale(t, pgtest.DSN(t))
}

// In another database a renamed relation's old name stands until it is
// looked up again (namesRetry): names_test.go's TestPollNamesARenamedRelation.

func renamedNotStale(t *testing.T, dsn string) {
	ctx := context.Background()
	m := connect(t, pgtest.DSN(t))
	mon := pgtest.Conn(t)
	{
		name := table("bp11_old")
		renamed := table("bp11_new")
		setup, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { setup.Close(context.Background()) })
		if _, err := setup.Exec(ctx, "CREATE TABLE "+name+" (id int)"); err != nil {
			t.Fatal(err)
		}
		queue := func(rel string) {
			t.Helper()
			// Closed when t ends, after blockedOn's statement has returned
			// (closing the waiter here raced with it).
			holder, waiter := dbConn(t, dsn), dbConn(t, dsn)
			if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE "+rel+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			wpid := blockedOn(t, mon, waiter, "BEGIN; LOCK TABLE "+rel+" IN ACCESS SHARE MODE; COMMIT")
			want := "public." + rel
			var labels []string
			pgtest.Eventually(t, "the queue on "+want+" named", func() bool {
				s, err := m.Poll(ctx)
				if err != nil {
					t.Fatal(err)
				}
				labels = labels[:0]
				for _, l := range s.Locks {
					if l.PID == wpid && !l.Granted {
						labels = append(labels, l.KeyLabel())
						if strings.Contains(l.KeyLabel(), want) {
							return true
						}
						for _, stale := range []string{name, renamed} {
							if stale != rel && strings.Contains(l.KeyLabel(), stale) {
								t.Fatalf("%s: the waiter's row is labelled %q: %s is %s now", dsn, l.KeyLabel(), stale, rel)
							}
						}
					}
				}
				return false
			})
			if _, err := holder.Exec(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
		}
		queue(name)
		if _, err := setup.Exec(ctx, "ALTER TABLE "+name+" RENAME TO "+renamed); err != nil {
			t.Fatal(err)
		}
		queue(renamed)
	}
}
