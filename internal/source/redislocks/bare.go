package redislocks

import (
	"context"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// BareRead sends one node the commands Read sends it, page by page (the
// first SCAN, then a pipeline per page of the next SCAN, TIME, one HMGET
// per hold and queueScript's EVALSHA per waiters' queue; a page whose node
// did not have the script cached is sent again once it is loaded, which
// Read does in its second round trip instead), has go-redis decode the
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
		var next *redis.ScanCmd
		for loaded := false; ; loaded = true {
			pipe := c.Pipeline()
			next = nil
			if cursor != 0 && page < maxScans {
				next = pipe.Scan(ctx, cursor, match, scanCount)
			}
			pipe.Time(ctx)
			var queues []*redis.Cmd
			holds := 0
			for _, k := range keys {
				if strings.HasPrefix(k, prefix) {
					pipe.HMGet(ctx, k, "p", "f", "o", "s", "e")
					holds++
				} else if _, w, ok := queueKeys(k, prefix); ok {
					queues = append(queues, queueScript.EvalSha(ctx, pipe, []string{k, w}, MaxWaiters))
				}
			}
			_, err := pipe.Exec(ctx)
			if !loaded && slices.ContainsFunc(queues, func(q *redis.Cmd) bool { return redis.HasErrorPrefix(q.Err(), "NOSCRIPT") }) {
				if err := queueScript.Load(ctx, c).Err(); err != nil {
					return n, err
				}
				continue
			}
			if err != nil && !redis.HasErrorPrefix(err, "WRONGTYPE") {
				return n, err
			}
			n += holds
			break
		}
		if next == nil {
			return n, nil
		}
		if keys, cursor, err = next.Result(); err != nil {
			return n, err
		}
	}
}
