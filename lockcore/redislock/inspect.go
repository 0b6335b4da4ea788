package redislock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Info is one held lock as a monitor shows it.
type Info struct {
	Key     string        // without the prefix
	Pattern string        // the registry pattern it fits ("sesslock:{tenant}:{agent}:{customer}:{channel}"), or "other"
	Owner   string        // the holder's Locker Owner
	Fence   int64         // the grant's fence
	Token   string        // the first 6 characters of the token; never the whole token
	Since   time.Time     // when it was granted, by Redis's clock
	TTL     time.Duration // time left before Redis releases it by itself
	Waiters []Waiter      // the registered waiters, longest-waiting first (the next to get it)
}

// Waiter is one registered waiter of a lock.
type Waiter struct {
	Owner string    // the waiter's Locker Owner
	Token string    // the first 6 characters of its token
	Since time.Time // when it began to wait, by Redis's clock
}

// Inspect lists the locks held under prefix ("" for the default), for
// monitors: read-only, with SCAN (never KEYS) on every master, at most
// limit locks (default 1,000) and at most 100 SCAN calls of 1,000 keys per
// node per call, so it stays cheap however big the keyspace. Locks are
// sorted by key. Waiters whose registration has expired (their process
// died) are left out.
func Inspect(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) ([]Info, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if limit <= 0 {
		limit = 1000
	}
	keys, err := scanHolds(ctx, rdb, prefix, limit)
	if err != nil {
		return nil, fmt.Errorf("redislock: inspect: %w", err)
	}
	type reads struct {
		hold  *redis.SliceCmd
		pttl  *redis.DurationCmd
		queue *redis.ZSliceCmd
		info  *redis.MapStringStringCmd
	}
	rs := make([]reads, len(keys))
	var clock *redis.TimeCmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		clock = p.Time(ctx)
		for i, k := range keys {
			ks := keysFor(prefix, strings.TrimPrefix(k, prefix))
			rs[i] = reads{
				hold: p.HMGet(ctx, k, "t", "f", "o", "s"), pttl: p.PTTL(ctx, k),
				queue: p.ZRangeWithScores(ctx, ks.queue, 0, -1), info: p.HGetAll(ctx, ks.info),
			}
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("redislock: inspect: %w", err)
	}
	now := clock.Val()
	out := make([]Info, 0, len(keys))
	for i, k := range keys {
		v, err := rs[i].hold.Result()
		if err != nil || len(v) < 4 || v[0] == nil {
			continue // released since the scan, or not a lock of this package
		}
		str := func(x any) string { s, _ := x.(string); return s }
		key := strings.TrimPrefix(k, prefix)
		fence, _ := strconv.ParseInt(str(v[1]), 10, 64)
		since, _ := strconv.ParseInt(str(v[3]), 10, 64)
		in := Info{
			Key: key, Pattern: patternOf(prefix, key), Owner: str(v[2]), Fence: fence,
			Token: prefix6(str(v[0])), Since: time.UnixMilli(since), TTL: max(rs[i].pttl.Val(), 0),
		}
		regs := rs[i].info.Val()
		for _, z := range rs[i].queue.Val() {
			tok, _ := z.Member.(string)
			deadline, _, owner, ok := parseRegistration(regs[tok])
			if !ok || (!now.IsZero() && deadline.Before(now)) {
				continue
			}
			in.Waiters = append(in.Waiters, Waiter{Owner: owner, Token: prefix6(tok), Since: time.UnixMicro(int64(z.Score))})
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b Info) int { return cmp.Compare(a.Key, b.Key) })
	return out, nil
}

// Inspect lists the locks held under this Locker's prefix; see Inspect.
func (l *Locker) Inspect(ctx context.Context, limit int) ([]Info, error) {
	return Inspect(ctx, l.rdb, l.prefix, limit)
}

// scanHolds returns up to limit keys of type hash under prefix, from every
// master.
func scanHolds(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) ([]string, error) {
	const count, maxCalls = 1000, 100
	match := globEscape(prefix) + "*"
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for range maxCalls {
			ks, next, err := c.ScanType(ctx, cursor, match, count, "hash").Result()
			if err != nil {
				return err
			}
			mu.Lock()
			keys = append(keys, ks...)
			full := len(keys) >= limit
			mu.Unlock()
			if full || next == 0 {
				return nil
			}
			cursor = next
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, s *redis.Client) error { return scan(ctx, s) })
	default:
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // SCAN may return a key twice
	if len(keys) > limit {
		keys = keys[:limit]
	}
	return keys, nil
}

// parseRegistration reads a waiter's registration, "deadline ttl channel owner".
func parseRegistration(s string) (deadline time.Time, ttl time.Duration, owner string, ok bool) {
	f := strings.SplitN(s, " ", 4)
	if len(f) < 4 {
		return time.Time{}, 0, "", false
	}
	dl, err1 := strconv.ParseInt(f[0], 10, 64)
	t, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, 0, "", false
	}
	return time.UnixMilli(dl), time.Duration(t) * time.Millisecond, f[3], true
}

func prefix6(tok string) string {
	if len(tok) > 6 {
		return tok[:6]
	}
	return tok
}

// globEscape escapes SCAN MATCH's special characters.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}
