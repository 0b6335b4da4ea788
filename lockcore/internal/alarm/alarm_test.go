package alarm

import (
	"context"
	"testing"
	"time"
)

// TestContextLikeWithDeadline: a context of Waits.With says what
// context.WithDeadline's would: its deadline (the caller's if earlier),
// Err DeadlineExceeded once the alarm ended it and Canceled once end
// ended it, and a context derived from it or an AfterFunc on it is
// cancelled with it.
func TestContextLikeWithDeadline(t *testing.T) {
	var ws Waits
	far := time.Now().Add(time.Hour)
	ctx, end := ws.With(context.Background(), far)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(far) {
		t.Errorf("Deadline %v %v, want %v", d, ok, far)
	}
	parent, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Minute))
	defer cancel()
	pd, _ := parent.Deadline()
	c, endc := ws.With(parent, far)
	if d, _ := c.Deadline(); !d.Equal(pd) {
		t.Errorf("Deadline %v under a caller's earlier deadline, want %v", d, pd)
	}
	endc()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	fired := make(chan struct{})
	context.AfterFunc(ctx, func() { close(fired) })
	end()
	if err := ctx.Err(); err != context.Canceled {
		t.Errorf("Err after end: %v, want Canceled", err)
	}
	<-child.Done()
	<-fired
	if n := ws.Len(); n != 0 {
		t.Errorf("%d contexts under way after both ended", n)
	}

	// Ended by the alarm: a shorter wait asked after a longer one moves
	// it earlier; the longer one stays open.
	long, endLong := ws.With(context.Background(), time.Now().Add(time.Hour))
	defer endLong()
	short, endShort := ws.With(context.Background(), time.Now().Add(200*time.Millisecond))
	defer endShort()
	select {
	case <-short.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a 200ms wait's context still open after 30s")
	}
	if err := short.Err(); err != context.DeadlineExceeded {
		t.Errorf("Err once the wait's deadline passed: %v, want DeadlineExceeded", err)
	}
	if long.Err() != nil {
		t.Errorf("the hour's wait ended with the 200ms one: %v", long.Err())
	}
	// A deadline already passed: ended at once.
	past, endPast := ws.With(context.Background(), time.Now().Add(-time.Second))
	defer endPast()
	if past.Err() != context.DeadlineExceeded {
		t.Errorf("Err of a deadline already passed: %v", past.Err())
	}
}
