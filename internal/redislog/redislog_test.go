package redislog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// A Redis that cannot be reached: go-redis's failed dials reach the
// project's logger, once until Redis answers again.
func TestDialFailuresLoggedOncePerStateChange(t *testing.T) {
	var buf bytes.Buffer
	Install(slog.New(slog.NewTextHandler(&buf, nil)))
	defer Install(nil)
	c := redis.NewClient(&redis.Options{Network: "unix", Addr: "/nonexistent-locktop/redis.sock", MaxRetries: -1})
	defer c.Close()
	ctx := context.Background()
	ping := func(n int) {
		for range n {
			if err := c.Ping(ctx).Err(); err == nil {
				t.Fatal("a ping to no server answered")
			}
		}
	}
	ping(10)
	if n := strings.Count(buf.String(), "failed to dial"); n != 1 {
		t.Fatalf("%d failed dials logged, want 1:\n%s", n, buf.String())
	}
	Healthy()
	ping(10)
	if n := strings.Count(buf.String(), "failed to dial"); n != 2 {
		t.Errorf("after Redis answered, %d failed dials logged in all, want 2:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "answering again") {
		t.Errorf("the recovery is not logged:\n%s", buf.String())
	}
}
