package source_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/model"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type stuck struct{}

func (stuck) Name() string { return "stuck" }
func (stuck) Poll(ctx context.Context) (model.Snapshot, error) {
	<-ctx.Done()
	return model.Snapshot{}, ctx.Err()
}

// A source that hangs or fails is its own error, within its own timeout;
// the others answer as usual and the merged snapshot has their locks.
func TestPollAllOutage(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	ok := source.Named("postgres", func(context.Context) (model.Snapshot, error) {
		return model.Snapshot{Taken: t0, Locks: []model.Lock{{Kind: model.KindAdvisory, PID: 1, Granted: true}}}, nil
	})
	failing := source.Named("redis", func(context.Context) (model.Snapshot, error) {
		return model.Snapshot{}, errors.New("dial unix /tmp/redis.sock:\nconnection refused")
	})
	parts := source.PollAll(context.Background(), []source.Source{ok, failing, source.WithTimeout(stuck{}, 50*time.Millisecond)})
	var te *source.TimeoutError
	if parts[0].Err != nil || parts[1].Err == nil || parts[1].Err.Error() != "dial unix /tmp/redis.sock: connection refused" ||
		!errors.As(parts[2].Err, &te) || te.Source != "stuck" {
		t.Fatalf("parts %+v", parts)
	}
	m := model.Merge(parts)
	if len(m.Locks) != 1 || m.Sources[1].Err == "" || m.Sources[2].Err != "stuck did not answer within 50ms" || m.Taken != t0 {
		t.Errorf("merged %+v", m)
	}
}
