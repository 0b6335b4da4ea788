package sim_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/sim"
)

// lossCount counts lockcore's EventLost: every loss lockcore saw.
type lossCount struct{ n atomic.Int64 }

func (c *lossCount) observe(e lockcore.Event) {
	if e.Kind == lockcore.EventLost {
		c.n.Add(1)
	}
}

// trialSim starts "steady" on dsn with the observer, small pools.
func trialSim(t *testing.T, dsn string, lost *lossCount) *sim.Sim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sim.New(ctx, sim.Options{DSN: dsn, Scenario: "steady", Schema: schema(), WorkMinConns: 2, LockMaxConns: 80,
		ConfigPath: filepath.Join(t.TempDir(), "config.json"), Observers: []lockcore.Observer{lost.observe},
		StopGrace: time.Second}) // as newSim's
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkTrial fails t unless the run kept every data invariant, counted
// every loss lockcore saw, and every lost section was fenced: its writes
// refused, stopped before it wrote again, or lost only after its writes,
// each accepted under its fence.
func checkTrial(t *testing.T, r sim.Report, lost *lossCount) {
	t.Helper()
	// A trial breaks the server from outside (kills, a restart) while the
	// simulator does not know it: failed attempts are what it causes, so
	// the error share does not judge a trial; the invariants do.
	if b := broken(r); b != "" || (!r.OK && !r.Errors.TooMany) {
		t.Errorf("invariants broken: %s", b)
	}
	if r.Errors.TooMany {
		t.Logf("errors of the trial's own faults: %+v", r.Errors)
	}
	var counted int64
	for _, c := range r.Workers {
		counted += c.Lost
	}
	if counted != lost.n.Load() || counted != r.Losses.Sections {
		t.Errorf("lockcore saw %d lost locks; the workers counted %d, with details of %d", lost.n.Load(), counted, r.Losses.Sections)
	}
	if r.Losses.Unfenced != 0 {
		t.Errorf("%d lost section(s) had no fence: nothing refused their writes (%+v)", r.Losses.Unfenced, r.Losses)
	}
	t.Logf("losses %+v; %d sections; workers: hook %+v", r.Losses, r.Sections, r.Workers["hook"])
}

// The trials of issue 9 on a server of the test's own (it terminates
// backends and restarts the server): "steady" while another connection
// terminates lock backends every 100–300 ms, and "steady" across a server
// restart. Each must end with every data invariant kept, every loss
// counted, and every lost section fenced.
func TestLossTrials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		t.Fatalf("a server of the test's own: %v", err)
	}
	t.Cleanup(func() { c.Stop() })
	dsn := c.DSN("postgres")

	t.Run("outside kills", func(t *testing.T) {
		var lost lossCount
		s := trialSim(t, dsn, &lost)
		killer, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer killer.Close(ctx)
		// Most kills go to a holder, the rest to any lock connection (an
		// idle one in the pool, too).
		var kills, holders int
		deadline := time.Now().Add(20 * time.Second)
		for holders < 8 {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d kills hit a lock holder in 20s", holders, kills)
			}
			time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
			var pid int32
			var held bool
			err := killer.QueryRow(ctx, `SELECT a.pid, EXISTS (SELECT 1 FROM pg_locks l
					WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted)
				FROM pg_stat_activity a WHERE starts_with(a.application_name, $1) AND a.datname = current_database()
				ORDER BY $2 AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted) DESC,
					random() LIMIT 1`, model.AppWithOwner(lockcore.DefaultApplicationName, lockcore.Owner()), rand.IntN(10) < 7).Scan(&pid, &held)
			if err == pgx.ErrNoRows {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := killer.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			kills++
			if held {
				holders++
			}
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		r := s.Report()
		t.Logf("%d kills, %d of them of a holder", kills, holders)
		checkTrial(t, r, &lost)
		if r.Losses.Sections == 0 {
			t.Error("no loss counted")
		}
	})

	t.Run("server restart", func(t *testing.T) {
		var lost lossCount
		s := trialSim(t, dsn, &lost)
		progress := func(n int64) func(model.SimStatus) bool {
			from := s.Report().Sections
			return func(model.SimStatus) bool { return s.Report().Sections >= from+n }
		}
		waitStatus(t, "sections complete before the restart", s, progress(50))
		if err := c.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, "sections complete after the restart", s, progress(150))
		if st := s.Status(); !st.Running {
			t.Error("the simulator stopped with the server")
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		checkTrial(t, s.Report(), &lost)
	})
}
