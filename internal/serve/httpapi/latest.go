package httpapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/locktop/locktop/model"
)

// SnapshotFunc returns the lock table to serve.
type SnapshotFunc func(ctx context.Context) (model.Snapshot, error)

// ErrNoSnapshot is returned by Latest.Snapshot before any snapshot arrived
// when it has no poll function of its own.
var ErrNoSnapshot = errors.New("no snapshot of the lock table yet")

// pollTimeout bounds a poll that Latest runs on behalf of its callers. The
// monitor's own statement_timeout (2s by default) ends it sooner.
const pollTimeout = 10 * time.Second

// Latest keeps the newest snapshot of a poll loop so HTTP requests are
// answered without a query of their own. It is safe for concurrent use.
//
// Snapshot returns the newest snapshot put while it is younger than maxAge
// (measured on this process's clock from Put). Past that, or before the
// first Put, it calls poll, and concurrent callers share that one poll; with
// no poll function it returns what it has, however old, or ErrNoSnapshot.
type Latest struct {
	poll   SnapshotFunc
	maxAge time.Duration
	flight singleflight.Group

	mu   sync.Mutex
	snap model.Snapshot
	at   time.Time // when snap was put; zero before the first
}

// NewLatest returns a Latest that polls with poll (nil: never) when its
// snapshot is older than maxAge.
func NewLatest(poll SnapshotFunc, maxAge time.Duration) *Latest {
	return &Latest{poll: poll, maxAge: maxAge}
}

// Put stores s as the newest snapshot, unless the one held was taken later
// (a shared poll that finished after the loop's). The snapshot is shared
// with every caller of Snapshot from then on: do not modify it.
func (l *Latest) Put(s model.Snapshot) {
	l.mu.Lock()
	if l.at.IsZero() || !s.Taken.Before(l.snap.Taken) {
		l.snap, l.at = s, time.Now()
	}
	l.mu.Unlock()
}

// fresh returns the snapshot held, if there is one young enough to serve.
func (l *Latest) fresh() (model.Snapshot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.at.IsZero() && (l.poll == nil || time.Since(l.at) <= l.maxAge) {
		return l.snap, true
	}
	return model.Snapshot{}, false
}

// StaleWait is how long Serve waits for a poll before it answers from the
// newest snapshot it has, marked stale: a database that hangs must not hold
// every request for the whole poll (statement_timeout and a grace).
const StaleWait = time.Second

// Served is a snapshot as Serve hands it out, with how current it is.
type Served struct {
	model.Snapshot
	// Age is the time since the snapshot was put, on this process's clock.
	Age time.Duration
	// Stale is true when a newer snapshot was due and the poll for it
	// failed or did not finish within StaleWait; Reason says which.
	Stale  bool
	Reason string
}

// Serve returns the newest snapshot for a request. While it is younger
// than maxAge (or Latest has no poll function) that is all. Otherwise it
// starts a poll, or joins the one running, and waits for it at most
// StaleWait: a fresh snapshot when the poll succeeds in time, else the
// newest one it has, marked stale with the reason. With no snapshot at all
// it returns the poll's error, or an error saying the database did not
// answer in time. The poll goes on after Serve returns and is put when it
// completes. Cancelling ctx makes Serve return at once with ctx's error.
func (l *Latest) Serve(ctx context.Context) (Served, error) {
	if snap, ok := l.fresh(); ok {
		return Served{Snapshot: snap, Age: l.age()}, nil
	}
	if l.poll == nil {
		return Served{}, ErrNoSnapshot
	}
	wait := time.NewTimer(StaleWait)
	defer wait.Stop()
	var reason string
	select {
	case r := <-l.flight.DoChan("poll", l.pollShared(ctx)):
		if r.Err == nil {
			return Served{Snapshot: r.Val.(model.Snapshot), Age: l.age()}, nil
		}
		reason = "the newest poll failed: " + r.Err.Error()
		if !l.has() {
			return Served{}, r.Err
		}
	case <-wait.C:
		if !l.has() {
			return Served{}, fmt.Errorf("the database did not answer within %s", StaleWait)
		}
		reason = fmt.Sprintf("the database did not answer within %s", StaleWait)
	case <-ctx.Done():
		return Served{}, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return Served{Snapshot: l.snap, Age: time.Since(l.at), Stale: true, Reason: reason}, nil
}

// Newest returns the newest snapshot put, however old, without polling;
// false before the first.
func (l *Latest) Newest() (model.Snapshot, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snap, !l.at.IsZero()
}

// has reports whether a snapshot was ever put.
func (l *Latest) has() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.at.IsZero()
}

// age is the time since the newest snapshot was put.
func (l *Latest) age() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Since(l.at)
}

// Snapshot returns the newest snapshot, polling first if it is too old (see
// Latest). Cancelling ctx makes the call return at once with ctx's error; a
// shared poll goes on for the other callers and is put when it completes.
func (l *Latest) Snapshot(ctx context.Context) (model.Snapshot, error) {
	if snap, ok := l.fresh(); ok {
		return snap, nil
	}
	if l.poll == nil {
		return model.Snapshot{}, ErrNoSnapshot
	}
	ch := l.flight.DoChan("poll", l.pollShared(ctx))
	select {
	case r := <-ch:
		if r.Err != nil {
			return model.Snapshot{}, r.Err
		}
		return r.Val.(model.Snapshot), nil
	case <-ctx.Done():
		return model.Snapshot{}, ctx.Err()
	}
}

// pollShared is the poll that concurrent callers share.
func (l *Latest) pollShared(ctx context.Context) func() (any, error) {
	return func() (any, error) {
		// A caller that found the snapshot stale may get here just after
		// another flight put a fresh one: use that, not a second poll.
		if snap, ok := l.fresh(); ok {
			return snap, nil
		}
		// Detached from the first caller, so its going away cannot fail the
		// poll the others wait for.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pollTimeout)
		defer cancel()
		s, err := l.poll(pctx)
		if err != nil {
			return nil, err
		}
		l.Put(s)
		return s, nil
	}
}
