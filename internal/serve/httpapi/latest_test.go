package httpapi_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
)

// While the loop's snapshot is young, requests cost the server nothing.
func TestLatestServesThePutSnapshot(t *testing.T) {
	var polls atomic.Int32
	poll := func(context.Context) (model.Snapshot, error) {
		polls.Add(1)
		return model.Snapshot{Connections: 99}, nil
	}
	l := httpapi.NewLatest(poll, time.Hour)
	l.Put(model.Snapshot{Connections: 1, Taken: time.Unix(100, 0)})
	for range 5 {
		s, err := l.Snapshot(context.Background())
		if err != nil || s.Connections != 1 {
			t.Fatalf("got %+v, %v", s, err)
		}
	}
	if n := polls.Load(); n != 0 {
		t.Errorf("%d polls with a fresh snapshot", n)
	}
	// An older snapshot (a slow shared poll) does not replace a newer one.
	l.Put(model.Snapshot{Connections: 2, Taken: time.Unix(99, 0)})
	if s, _ := l.Snapshot(context.Background()); s.Connections != 1 {
		t.Errorf("an older snapshot replaced a newer one: %+v", s)
	}
}

// With no snapshot yet, concurrent callers share one poll.
func TestLatestSharesOnePoll(t *testing.T) {
	var polls atomic.Int32
	release := make(chan struct{})
	poll := func(context.Context) (model.Snapshot, error) {
		polls.Add(1)
		<-release
		return model.Snapshot{Connections: 7, Taken: time.Now()}, nil
	}
	l := httpapi.NewLatest(poll, time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := l.Snapshot(context.Background())
			if err == nil && s.Connections != 7 {
				err = errors.New("wrong snapshot")
			}
			errs <- err
		})
	}
	// Let the first poll begin, then let it finish. Callers that arrive
	// after it finished find its snapshot fresh and do not poll again.
	for polls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := polls.Load(); n != 1 {
		t.Errorf("%d polls for 8 concurrent callers, want 1", n)
	}
}

// A stale snapshot is polled again; a failed poll is returned; a caller that
// gives up returns at once while the poll goes on.
func TestLatestStaleFailureAndCancel(t *testing.T) {
	fail := errors.New("server gone")
	var mode atomic.Int32 // 0 ok, 1 fail, 2 block
	block := make(chan struct{})
	poll := func(ctx context.Context) (model.Snapshot, error) {
		switch mode.Load() {
		case 1:
			return model.Snapshot{}, fail
		case 2:
			<-block
		}
		return model.Snapshot{Taken: time.Now(), Connections: 3}, nil
	}
	l := httpapi.NewLatest(poll, 0) // every snapshot is stale at once
	l.Put(model.Snapshot{Connections: 1})
	if s, err := l.Snapshot(context.Background()); err != nil || s.Connections != 3 {
		t.Errorf("stale snapshot not polled again: %+v, %v", s, err)
	}
	mode.Store(1)
	if _, err := l.Snapshot(context.Background()); !errors.Is(err, fail) {
		t.Errorf("failed poll: %v", err)
	}
	mode.Store(2)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := l.Snapshot(ctx); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v", err)
	}
	close(block) // the shared poll finishes; nothing is left running
	mode.Store(0)
	if _, err := l.Snapshot(context.Background()); err != nil {
		t.Error(err)
	}
}

// Without a poll function, Latest serves what it has, however old.
func TestLatestWithoutPoll(t *testing.T) {
	l := httpapi.NewLatest(nil, time.Nanosecond)
	if _, err := l.Snapshot(context.Background()); !errors.Is(err, httpapi.ErrNoSnapshot) {
		t.Errorf("before any Put: %v", err)
	}
	l.Put(model.Snapshot{Connections: 4})
	time.Sleep(time.Millisecond)
	if s, err := l.Snapshot(context.Background()); err != nil || s.Connections != 4 {
		t.Errorf("old snapshot: %+v, %v", s, err)
	}
}
