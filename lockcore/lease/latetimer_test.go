package lease

import (
	"errors"
	"testing"
	"time"
)

// TestLateTimerStillLost: the local deadline, not the timer that fires at
// it, decides. A timer that fires late (a starved scheduler) must not
// leave a lock looking held past its deadline, when the database may
// already have let another holder take it over: Err, and FenceOf and
// WriteAtomic through it, see the deadline itself.
func TestLateTimerStillLost(t *testing.T) {
	e := sqliteEnv(t)
	m := e.open(Options{Lease: 200 * time.Millisecond, Heartbeat: -1})
	l, err := m.Acquire(ctxT(t), Map("m1"), Write)
	if err != nil {
		t.Fatal(err)
	}
	m.expiry.Stop() // the timer is late: it has not fired yet
	l.mu.Lock()
	until := l.deadline
	l.mu.Unlock()
	time.Sleep(time.Until(until) + 10*time.Millisecond)
	if err := l.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("Err %v past the lock's deadline, want ErrLost", err)
	}
	if _, ok := FenceOf(l.Context(), Map("m1")); ok {
		t.Error("FenceOf still gives the fence past the lock's deadline")
	}
	select {
	case <-l.Done():
	default:
		t.Error("Done still open once Err reported the loss")
	}
}

// TestLateTimerJobStillLost: the same for a job's slot.
func TestLateTimerJobStillLost(t *testing.T) {
	e := sqliteEnv(t)
	m := e.open(Options{Lease: 200 * time.Millisecond, Heartbeat: -1})
	s, err := m.StartJob(ctxT(t), Job{ID: "j", Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.timer.Stop() // the timer is late: it has not fired yet
	until := s.deadline
	s.mu.Unlock()
	time.Sleep(time.Until(until) + 10*time.Millisecond)
	if err := s.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("Err %v past the job's deadline, want ErrLost", err)
	}
	if s.Context().Err() == nil {
		t.Error("the job's context still open once Err reported the loss")
	}
}
