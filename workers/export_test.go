package workers

import (
	"context"
	"sync"

	"github.com/locktop/locktop/lockcore"
)

// MintFences makes sections take a fence of the test's own where lockcore
// gives none (0: fencing off, or a lockcore that does not mint fences
// yet): per key, one more than the last fence seen, at each section's
// entry. Sections enter one after another under the lock, so these fences
// grow with the grants as lockcore's do. It returns the restore function.
func MintFences() (restore func()) {
	var mu sync.Mutex
	last := map[lockcore.Key]int64{}
	old := fenceOf
	fenceOf = func(ctx context.Context, key lockcore.Key) (int64, bool) {
		f, ok := old(ctx, key)
		if !ok {
			return 0, false
		}
		mu.Lock()
		defer mu.Unlock()
		if f == 0 {
			f = last[key] + 1
		}
		last[key] = max(last[key], f)
		return f, true
	}
	return func() { fenceOf = old }
}

// StartJob starts a tiles job on map m and registers it for the caps
// check, on the first healthy node or (stalled) on the stalled node, whose
// slot lease is never renewed. It returns the slot's context and the
// job's end.
func StartJob(ctx context.Context, j *Jobs, m MapRef, stalled bool) (context.Context, func(), error) {
	node := j.nodes[0]
	if stalled {
		node = j.stall
	}
	s, err := j.startJobOn(ctx, node, "tiles", m.Project, m.Map)
	if err != nil {
		return nil, nil, err
	}
	return s.ctx, s.done, nil
}
