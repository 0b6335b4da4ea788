package workers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/source/redislocks"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/workers"
)

// newTurns is a world with conversations and seed 002's turns on a Redis
// of the test's own (so an outage hurts no other test).
func newTurns(t *testing.T, opts workers.TurnOptions) (*world, *workers.Turns) {
	t.Helper()
	return newTurnsOn(t, redistest.ClientOf(t, redistest.Private(t)), opts)
}

// newTurnsOn is newTurns on rdb, for a test that also touches the keys.
func newTurnsOn(t *testing.T, rdb *redis.Client, opts workers.TurnOptions) (*world, *workers.Turns) {
	t.Helper()
	w := newWorld(t, 1)
	if err := workers.EnsureConversations(context.Background(), w.env.DB, 4); err != nil {
		t.Fatal(err)
	}
	tu := workers.NewTurns(w.env, rdb, opts)
	t.Cleanup(tu.Close)
	return w, tu
}

// waitTurnWaiter polls until a pod waits for conversation conv's lock.
func waitTurnWaiter(t *testing.T, tu *workers.Turns, rdbInspect func() ([]redislocks.Info, error), conv int32) {
	t.Helper()
	key := workers.ConversationKey(conv)
	pgtest.Eventually(t, "a pod waits for "+key, func() bool {
		infos, err := rdbInspect()
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range infos {
			if in.Key == key && len(in.Waiters) > 0 {
				return true
			}
		}
		return false
	})
}

// turnRace is one of seed 002's races between two deliveries on one
// conversation: the first stops after step 2's read; the second runs.
type turnRace struct {
	name  string
	same  bool // the second delivers the first's message again (a burst)
	invs  []workers.Invariant
	notes string // with locks, a note the second leaves
}

var turnRaces = []turnRace{
	{name: "two messages at once", invs: []workers.Invariant{workers.InvTurnSequence, workers.InvStaleStep}},
	{name: "a message delivered twice", same: true, invs: []workers.Invariant{workers.InvAnsweredOnce},
		notes: "already answered"},
}

func TestTurnRaces(t *testing.T) {
	for _, rc := range turnRaces {
		for _, locking := range []bool{false, true} {
			t.Run(rc.name+map[bool]string{false: "/no locks", true: "/locks"}[locking], func(t *testing.T) {
				w, tu := newTurns(t, workers.TurnOptions{Pods: 2, TTL: 5 * time.Second})
				ctx := context.Background()
				w.env.SetLocking(locking)
				msg := tu.NewMessage()
				second := tu.NewMessage()
				if rc.same {
					second = msg
				}
				b := w.hooks.stop(t, workers.PointTurnRead, 1)
				first := goErr(func() error { return tu.Deliver(ctx, 1, msg) })
				b.wait(t)
				done := goErr(func() error { return tu.Deliver(ctx, 1, second) })
				if locking {
					waitTurnWaiter(t, tu, func() ([]redislocks.Info, error) { return tu.Inspect(ctx) }, 1)
				} else if err := recv(t, done); err != nil {
					t.Fatal(err)
				}
				b.release()
				if err := recv(t, first); err != nil {
					t.Fatal(err)
				}
				if locking {
					if err := recv(t, done); err != nil {
						t.Fatal(err)
					}
				}
				if err := tu.Audit(ctx); err != nil {
					t.Fatal(err)
				}
				if !locking {
					for _, inv := range rc.invs {
						if w.rec.broken(inv) == 0 {
							t.Errorf("%s not caught without locks", inv)
						}
					}
					return
				}
				w.rec.clean(t)
				if rc.notes != "" && !w.rec.hasNote(rc.notes) {
					t.Errorf("no note %q", rc.notes)
				}
				if st := tu.Stats(); st.Committed != 2-map[bool]int64{false: 0, true: 1}[rc.same] {
					t.Errorf("committed %d turns", st.Committed)
				}
			})
		}
	}
}

// A turn whose brain outlives its hold without extending: the hold
// expires, the next message's turn takes the conversation and commits, and
// the stale turn's commit must be refused by the fence; its release then
// deletes nothing. With the fence check off, the checks must catch the
// stale commit.
//
// The stale turn's hold is made to expire while it is paused (its TTL cut
// to 1ms, as a lapse would end it), not by a short TTL for every turn: a
// 300ms TTL also had to cover the next turn's whole run, which a loaded
// box can stretch past it.
func TestTurnOutlivesItsHold(t *testing.T) {
	for _, fencing := range []bool{true, false} {
		t.Run(map[bool]string{true: "fenced", false: "fence check off"}[fencing], func(t *testing.T) {
			rdb := redistest.ClientOf(t, redistest.Private(t))
			w, tu := newTurnsOn(t, rdb, workers.TurnOptions{Pods: 2, TTL: time.Minute, Wait: 10 * time.Second})
			tu.SetFencing(fencing)
			ctx := context.Background()
			b := w.hooks.hold(t, workers.PointTurnRead, 1)
			first := goErr(func() error { return tu.Deliver(ctx, 1, tu.NewMessage()) })
			b.wait(t)
			// The hold is Prefix+key (redislock): it expires, its turn paused.
			hold := tu.Options().Prefix + workers.ConversationKey(1)
			if ok, err := rdb.PExpire(ctx, hold, time.Millisecond).Result(); !ok || err != nil {
				t.Fatalf("expiring the paused turn's hold %s: %v, %v", hold, ok, err)
			}
			pgtest.Eventually(t, "the paused turn's hold expires", func() bool {
				n, err := rdb.Exists(ctx, hold).Result()
				return err == nil && n == 0
			})
			// The second finds the conversation free and takes it.
			if err := tu.Deliver(ctx, 1, tu.NewMessage()); err != nil {
				t.Fatal(err)
			}
			b.release()
			err := recv(t, first)
			if fencing {
				if !errors.Is(err, workers.ErrFenced) {
					t.Fatalf("the stale commit: %v, want ErrFenced", err)
				}
				if st := tu.Stats(); st.StaleRefused != 1 || st.Expired != 1 || st.Committed != 1 {
					t.Errorf("stats %+v: want one refused, one expired release, one commit", st)
				}
				if n := w.rec.count(workers.KindTurn, model.OutcomeLost); n != 1 {
					t.Errorf("%d lost turns, want 1", n)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if err := tu.Audit(ctx); err != nil {
				t.Fatal(err)
			}
			if fencing {
				w.rec.clean(t)
				return
			}
			for _, inv := range []workers.Invariant{workers.InvStaleFence, workers.InvTurnSequence} {
				if w.rec.broken(inv) == 0 {
					t.Errorf("%s not caught with the fence check off", inv)
				}
			}
		})
	}
}

// A Redis outage: turns fail closed, or with FailOpen run unprotected and
// collide, which the checks catch.
func TestTurnRedisOutage(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(map[bool]string{false: "fail closed", true: "fail open"}[open], func(t *testing.T) {
			w, tu := newTurns(t, workers.TurnOptions{Pods: 2, TTL: time.Second, Wait: 200 * time.Millisecond, FailOpen: open})
			ctx := context.Background()
			if err := tu.Outage(ctx, 3*time.Second); err != nil {
				t.Fatal(err)
			}
			b := w.hooks.stop(t, workers.PointTurnRead, 1)
			first := goErr(func() error { return tu.Deliver(ctx, 1, tu.NewMessage()) })
			if open {
				b.wait(t)
			}
			err := tu.Deliver(ctx, 1, tu.NewMessage())
			b.release()
			ferr := recv(t, first)
			if !open {
				for _, err := range []error{err, ferr} {
					if !errors.Is(err, redislock.ErrUnavailable) {
						t.Errorf("with Redis paused: %v, want ErrUnavailable", err)
					}
				}
				if st := tu.Stats(); st.Unavailable != 2 || st.Committed != 0 {
					t.Errorf("stats %+v", st)
				}
				w.rec.clean(t)
				return
			}
			if err != nil || ferr != nil {
				t.Fatalf("fail open: %v, %v", err, ferr)
			}
			if st := tu.Stats(); st.FailOpen != 2 {
				t.Errorf("stats %+v: want two fail-open turns", st)
			}
			if w.rec.broken(workers.InvTurnSequence) == 0 {
				t.Error("the unprotected turns' collision was not caught")
			}
		})
	}
}

// A pod that crashes mid-turn leaves its hold to the TTL: the next turn
// waits for it, and the audit finds nothing leaked. A hold still taken
// when the audit runs is a leak.
func TestTurnPodCrash(t *testing.T) {
	w, tu := newTurns(t, workers.TurnOptions{Pods: 1, TTL: 400 * time.Millisecond})
	ctx := context.Background()
	b := w.hooks.stop(t, workers.PointTurnRead, 1)
	first := goErr(func() error { return tu.Deliver(ctx, 1, tu.NewMessage()) })
	b.wait(t)
	tu.CrashPod()
	if err := recv(t, first); err == nil {
		t.Fatal("the crashed pod's turn ended without an error")
	}
	if err := tu.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	w.rec.clean(t) // the crashed hold is left to expire, not leaked
	if err := tu.Deliver(ctx, 1, tu.NewMessage()); err != nil {
		t.Fatal(err)
	}
	if st := tu.Stats(); st.Crashed != 1 || st.Committed != 1 {
		t.Errorf("stats %+v", st)
	}
	// A turn stopped while holding is a leak to the audit.
	b2 := w.hooks.stop(t, workers.PointTurnRead, 2)
	held := goErr(func() error { return tu.Deliver(ctx, 2, tu.NewMessage()) })
	b2.wait(t)
	if err := tu.Audit(ctx); err != nil {
		t.Fatal(err)
	}
	b2.release()
	if err := recv(t, held); err != nil {
		t.Fatal(err)
	}
	if w.rec.broken(workers.InvTurnLocks) != 1 || !strings.Contains(strings.Join(w.rec.violations[workers.InvTurnLocks], ""), "leaked") {
		t.Errorf("the hold taken during the audit was not reported: %v", w.rec.violations)
	}
}

// Each turn holds its conversation's lock under an owner of its own: under
// the pod's alone, two turns of one pod, one holding and one waiting,
// looked like one party holding and waiting, and the deadlock watch
// reported a cycle no turn made (acf, under load).
func TestTurnsOwnTheirHolds(t *testing.T) {
	w, tu := newTurns(t, workers.TurnOptions{Pods: 1, Wait: 10 * time.Second})
	ctx := context.Background()
	var bs []*barrier
	var errs []<-chan error
	for conv := int32(1); conv <= 2; conv++ {
		b := w.hooks.hold(t, workers.PointTurnRead, conv)
		errs = append(errs, goErr(func() error { return tu.Deliver(ctx, conv, tu.NewMessage()) }))
		bs = append(bs, b)
	}
	for _, b := range bs {
		b.wait(t)
	}
	infos, err := tu.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]bool{}
	for _, in := range infos {
		owners[in.Owner] = true
	}
	if len(infos) != 2 || len(owners) != 2 {
		t.Errorf("one pod's two turns hold %d locks under %d owners %v, want 2 under 2", len(infos), len(owners), owners)
	}
	for i, b := range bs {
		b.release()
		if err := recv(t, errs[i]); err != nil {
			t.Fatal(err)
		}
	}
}
