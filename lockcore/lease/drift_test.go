package lease

import (
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// TestLocalDeadlineErrsEarly: a holder's local deadline errs early by the
// family's drift margin (lockcore.LocalDeadline), as redislock's does,
// after a grant, a renewal, an upgrade and a job's start and renewal. The
// lease ends by the database's clock; a local clock that runs slow would
// otherwise keep a holder believing it holds after the database let
// another holder take over. The lease is long, so the margin (36s) dwarfs
// any round trip: a deadline counted from the request without it is later
// than now + lease - margin.
func TestLocalDeadlineErrsEarly(t *testing.T) {
	const lease = time.Hour
	m := sqliteEnv(t).open(Options{Lease: lease, Heartbeat: 20 * time.Millisecond})
	check := func(what string, deadline time.Time) {
		t.Helper()
		if limit := lockcore.LocalDeadline(time.Now(), lease); deadline.After(limit) {
			t.Errorf("after %s the local deadline is %v past now + lease - drift: no margin for clock drift",
				what, deadline.Sub(limit).Round(time.Millisecond))
		}
	}
	lockDeadline := func(l *Lock) time.Time {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.deadline
	}
	jobDeadline := func(s *JobSlot) time.Time {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.deadline
	}

	l, err := m.Acquire(ctxT(t), Map("m1"), Upgradeable)
	if err != nil {
		t.Fatal(err)
	}
	granted := lockDeadline(l)
	check("a grant", granted)
	pgtest.Eventually(t, "a heartbeat renews the lock", func() bool { return lockDeadline(l).After(granted) })
	check("a renewal", lockDeadline(l))
	if err := l.Upgrade(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	check("an upgrade", lockDeadline(l))

	s, err := m.StartJob(ctxT(t), Job{ID: "j", Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	started := jobDeadline(s)
	check("a job's start", started)
	pgtest.Eventually(t, "a heartbeat renews the job", func() bool { return jobDeadline(s).After(started) })
	check("a job's renewal", jobDeadline(s))
	if err := s.Finish(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
