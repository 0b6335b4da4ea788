package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// TestMain runs the tests against a throw-away Redis.
func TestMain(m *testing.M) { redistest.Main(m) }

// newLocker returns a Locker on the test server under a prefix of the
// test's own, closed when the test ends.
func newLocker(t testing.TB, opts Options) *Locker {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = redistest.Prefix(t)
	}
	return lockerOn(t, redistest.Client(t), opts)
}

func lockerOn(t testing.TB, rdb redis.UniversalClient, opts Options) *Locker {
	t.Helper()
	l := New(rdb, opts)
	t.Cleanup(func() { l.Close() })
	return l
}

// replyWait is the Wait of a Locker whose call must come back with an
// error reply (OOM, BUSY, READONLY): Redis answers at once, so the wait only
// has to outlast a round trip, and a connect, on a loaded box; a shorter
// one would end as ErrUnavailable before the reply came.
const replyWait = 5 * time.Second

// within fails t if ch is not closed within d: a guard against a test
// hanging, not a timing assertion.
func within(t testing.TB, what string, ch <-chan struct{}, d time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting until %s", d, what)
	}
}

// quiet drops go-redis's own log lines (failed dials while a test has
// stopped its server).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quiet{}) }

// inspect lists the locks under l's prefix, as the monitor reads them.
func inspect(ctx context.Context, l *Locker, limit int) (redislocks.Table, error) {
	return redislocks.Read(ctx, l.rdb, l.prefix, limit)
}
