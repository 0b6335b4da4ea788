package redissource_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// The monitor breaks a deadlock by force-releasing a lock by its full key:
// the holder loses it, and the audit stream names locktop and why.
func TestForceReleaseIsAudited(t *testing.T) {
	ctx := context.Background()
	prefix := redistest.Prefix(t) // its own: the audit stream lives on after a run (-count 2 read two records)
	a := redislock.New(redistest.Client(t), redislock.Options{Prefix: prefix, Owner: "pod-a", TTL: 30 * time.Second})
	defer a.Close()
	key := redislock.SessionKey("t1", "a1", "c1", "web")
	held, err := a.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	src := redissource.New(redis.NewClient(redistest.Options(t)), redissource.Options{Prefix: prefix})
	defer src.Close()
	if err := src.ForceRelease(ctx, "other:"+key, "locktop", "test"); err == nil {
		t.Error("a name outside the prefix was force-released")
	}
	if err := src.ForceRelease(ctx, prefix+key, "locktop", "breaking a deadlock"); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); !errors.Is(err, redislock.ErrNotHeld) {
		t.Errorf("the holder's release after the force release: %v, want ErrNotHeld", err)
	}
	recs, err := a.Audit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Actor != "locktop" || recs[0].Reason != "breaking a deadlock" || recs[0].VictimOwner != "pod-a" {
		t.Errorf("audit %+v", recs)
	}
	if err := src.ForceRelease(ctx, prefix+key, "locktop", "again"); !errors.Is(err, redislock.ErrNotHeld) {
		t.Errorf("a second force release: %v, want ErrNotHeld", err)
	}
}
