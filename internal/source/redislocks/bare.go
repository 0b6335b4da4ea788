package redislocks

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// BareRead sends one node the commands Read sends it, page by page (the
// first SCAN, then a pipeline per page of the next SCAN, TIME, one HMGET
// per hold and queueScript per waiters' queue), has go-redis decode the
// replies and drops them: the bare read of every field Read reads, the
// baseline of Read's cost (DESIGN: a source within 1.3× its bare read).
// It returns the number of keys under the prefix it sent an HMGET for
// (holds, and plain strings, which answer WRONGTYPE); what Read reads of
// those in a second round trip (strings, holds of an older redislock) is
// not read again.
func BareRead(ctx context.Context, c *redis.Client, prefix string) (int, error) {
	match := "*" + globEscape(prefix) + "*"
	keys, cursor, err := c.Scan(ctx, 0, match, scanCount).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for page := 1; ; page++ {
		pipe := c.Pipeline()
		var next *redis.ScanCmd
		if cursor != 0 && page < maxScans {
			next = pipe.Scan(ctx, cursor, match, scanCount)
		}
		pipe.Time(ctx)
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				pipe.HMGet(ctx, k, "p", "f", "o", "s", "e")
				n++
			} else if _, w, ok := queueKeys(k, prefix); ok {
				queueScript.Eval(ctx, pipe, []string{k, w}, MaxWaiters)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
			return n, err
		}
		if next == nil {
			return n, nil
		}
		if keys, cursor, err = next.Result(); err != nil {
			return n, err
		}
	}
}
