package httpapi

import (
	"context"
	"errors"
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
	ch := l.flight.DoChan("poll", func() (any, error) {
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
	})
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
