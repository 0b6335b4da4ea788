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

// Table is the session locks under one prefix at one instant, as Inspect
// reads them.
type Table struct {
	Taken time.Time // Redis's clock at the read
	Locks []Info    // by key
	// Truncated says the listing stopped at a bound (the limit, or the SCAN
	// bound on a node): there may be more locks than Locks.
	Truncated bool
}

// Info is one held lock as a monitor shows it.
type Info struct {
	Key     string        // without the prefix
	Pattern string        // the registry pattern it fits ("sesslock:{tenant}:{agent}:{customer}:{channel}"), or "other"
	Owner   string        // the holder's Locker Owner
	Fence   int64         // the grant's fence
	Token   string        // the first 6 characters of the token; never the whole token
	Since   time.Time     // when it was granted, by Redis's clock
	TTL     time.Duration // time left before Redis releases it by itself
	Waiters []Waiter      // the live registered waiters, longest-waiting first (the next to get it)
	// MoreWaiters says the queue holds more than the MaxWaiters registrations
	// read; Waiters lists the live ones among the first MaxWaiters.
	MoreWaiters bool
}

// Waiter is one registered waiter of a lock.
type Waiter struct {
	Owner string    // the waiter's Locker Owner
	Token string    // the first 6 characters of its token
	Since time.Time // when it began to wait, by Redis's clock
}

// Bounds of one Inspect.
const (
	DefaultInspectLimit = 1000 // locks, when Inspect's limit is 0
	MaxWaiters          = 100  // waiters read per lock
	scanCount           = 1000 // SCAN's COUNT
	maxScans            = 100  // SCAN calls per node: at most 100,000 keys looked at per node
)

// Inspect lists the locks held under prefix ("" for the default), for
// monitors. It only reads (SCAN, HMGET, PTTL, ZRANGE, TIME: a read-only ACL
// user will do), never uses KEYS, and is bounded: at most limit locks
// (DefaultInspectLimit when limit <= 0), at most 100 SCAN calls of 1,000
// keys on each master (so past 100,000 keys on a node it sees part of the
// keyspace and says Truncated), and at most MaxWaiters waiters per lock. It
// takes two round trips per node, three when some lock has waiters. On a
// *redis.ClusterClient it scans every master; on a *redis.Ring every shard.
// Waiters whose registration has expired (their process died) are left out.
func Inspect(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) (Table, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if limit <= 0 {
		limit = DefaultInspectLimit
	}
	keys, truncated, err := scanHolds(ctx, rdb, prefix, limit)
	if err != nil {
		return Table{}, fmt.Errorf("redislock: inspect: %w", err)
	}
	type reads struct {
		ks    keyset
		hold  *redis.SliceCmd
		pttl  *redis.DurationCmd
		queue *redis.ZSliceCmd
		regs  *redis.SliceCmd
	}
	rs := make([]reads, len(keys))
	var clock *redis.TimeCmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		clock = p.Time(ctx)
		for i, k := range keys {
			ks := keysFor(prefix, strings.TrimPrefix(k, prefix))
			rs[i] = reads{ks: ks, hold: p.HMGet(ctx, k, "t", "f", "o", "s"), pttl: p.PTTL(ctx, k),
				queue: p.ZRangeWithScores(ctx, ks.queue, 0, MaxWaiters)}
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return Table{}, fmt.Errorf("redislock: inspect: %w", err)
	}
	// The waiters' registrations, only for the queues that have some.
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range rs {
			q := rs[i].queue.Val()
			if len(q) == 0 {
				continue
			}
			toks := make([]string, 0, len(q))
			for _, z := range q {
				tok, _ := z.Member.(string)
				toks = append(toks, tok)
			}
			rs[i].regs = p.HMGet(ctx, rs[i].ks.info, toks...)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return Table{}, fmt.Errorf("redislock: inspect: %w", err)
	}
	now := clock.Val()
	t := Table{Taken: now, Locks: make([]Info, 0, len(keys)), Truncated: truncated}
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
		q := rs[i].queue.Val()
		if len(q) > MaxWaiters {
			q, in.MoreWaiters = q[:MaxWaiters], true
		}
		var regs []any
		if rs[i].regs != nil {
			regs = rs[i].regs.Val()
		}
		for j, z := range q {
			if j >= len(regs) {
				break
			}
			tok, _ := z.Member.(string)
			deadline, _, owner, ok := parseRegistration(str(regs[j]))
			if !ok || (!now.IsZero() && deadline.Before(now)) {
				continue
			}
			in.Waiters = append(in.Waiters, Waiter{Owner: owner, Token: prefix6(tok), Since: time.UnixMicro(int64(z.Score))})
		}
		t.Locks = append(t.Locks, in)
	}
	slices.SortFunc(t.Locks, func(a, b Info) int { return cmp.Compare(a.Key, b.Key) })
	return t, nil
}

// Inspect lists the locks held under this Locker's prefix; see Inspect.
func (l *Locker) Inspect(ctx context.Context, limit int) (Table, error) {
	return Inspect(ctx, l.rdb, l.prefix, limit)
}

// scanHolds returns up to limit keys of type hash under prefix, from every
// master, and whether a bound stopped it before it had seen them all.
func scanHolds(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) ([]string, bool, error) {
	match := globEscape(prefix) + "*"
	var mu sync.Mutex
	var keys []string
	truncated := false
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for range maxScans {
			ks, next, err := c.ScanType(ctx, cursor, match, scanCount, "hash").Result()
			if err != nil {
				return err
			}
			mu.Lock()
			keys = append(keys, ks...)
			full := len(keys) >= limit
			if full && next != 0 {
				truncated = true
			}
			mu.Unlock()
			if full || next == 0 {
				return nil
			}
			cursor = next
		}
		mu.Lock()
		truncated = true
		mu.Unlock()
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
		return nil, false, err
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // SCAN may return a key twice
	if len(keys) > limit {
		keys, truncated = keys[:limit], true
	}
	return keys, truncated, nil
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
