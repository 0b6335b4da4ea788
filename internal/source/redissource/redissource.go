// Package redissource is the monitor's Redis source: seed 002's session
// mutexes under one key prefix, read with lockcore/redislock's Inspect
// (SCAN, never KEYS, bounded per poll) as model locks of kind redis, with
// owner, token prefix, fence, TTL and the registered waiters in order.
// Keys under the prefix that are plain strings, as a service that takes
// the lock with `SET key token NX PX ms` leaves them, are listed too, by a
// second bounded SCAN: their owner is unknown, their token prefix and TTL
// are shown.
package redissource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/redislog"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/lockcore/registry"
	"github.com/locktop/locktop/model"
)

// Name is the source's name on its banner and in /api/locks.
const Name = "redis"

// Options tune a Source. Zero values take the defaults.
type Options struct {
	// Prefix is the key prefix of the locks: redislock.DefaultPrefix
	// ("sesslock:") when empty.
	Prefix string
	// Limit bounds the locks listed per poll (redislock.DefaultInspectLimit
	// when 0); string keys are bounded by it too.
	Limit int
}

// Source reads one Redis's session mutexes. It is safe for concurrent use.
type Source struct {
	rdb    *redis.Client
	prefix string
	limit  int
}

// ErrURL is a --redis URL that cannot be used.
var ErrURL = errors.New("bad Redis URL")

// Open returns a Source for the Redis at url (redis://, rediss:// or
// unix://). It does not connect: a Redis that is down is a failed poll, on
// its own banner, not a failed start.
func Open(url string, opts Options) (*Source, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		// go-redis quotes the URL in some errors: never show a password.
		return nil, fmt.Errorf("%w: %s", ErrURL, redactURL(err.Error(), url))
	}
	o.ContextTimeoutEnabled = true // a hung Redis ends the poll at its deadline
	o.MaxRetries = -1              // a poll is retried by the next poll
	o.PoolSize = 2
	o.ClientName = "locktop.monitor"
	return New(redis.NewClient(o), opts), nil
}

// New returns a Source reading through rdb (which the caller closes, or
// Close does).
func New(rdb *redis.Client, opts Options) *Source {
	if opts.Prefix == "" {
		opts.Prefix = redislock.DefaultPrefix
	}
	if opts.Limit <= 0 {
		opts.Limit = redislock.DefaultInspectLimit
	}
	return &Source{rdb: rdb, prefix: opts.Prefix, limit: opts.Limit}
}

// Name is "redis".
func (s *Source) Name() string { return Name }

// Close closes the client.
func (s *Source) Close() { _ = s.rdb.Close() }

// Poll lists the locks once: each held lock's holder, then its waiters in
// the order they will get it, timed by Redis's clock.
func (s *Source) Poll(ctx context.Context) (model.Snapshot, error) {
	start := time.Now()
	t, err := redislock.Inspect(ctx, s.rdb, s.prefix, s.limit)
	if err != nil {
		return model.Snapshot{}, describe(err)
	}
	snap := model.Snapshot{Taken: t.Taken}
	for i := range t.Locks {
		snap.Locks = append(snap.Locks, locksOf(s.prefix, &t.Locks[i], t.Taken)...)
	}
	plain, err := s.plainKeys(ctx, t.Taken, len(t.Locks))
	if err != nil {
		return model.Snapshot{}, describe(err)
	}
	snap.Locks = append(snap.Locks, plain...)
	snap.Latency = time.Since(start)
	redislog.Healthy() // go-redis's next failure is news again
	return snap, nil
}

// locksOf turns one lock into its holder's row and its waiters'.
func locksOf(prefix string, in *redislock.Info, now time.Time) []model.Lock {
	key := prefix + in.Key
	ns := registry.NameOf(registry.RedisKey, key)
	out := make([]model.Lock, 0, 1+len(in.Waiters))
	out = append(out, model.Lock{
		Kind: model.KindRedis, Name: key, Namespace: ns, Owner: in.Owner, Token: in.Token, Fence: in.Fence,
		Mode: "exclusive", Granted: true, HeldSince: in.Since, Expires: expiry(now, in.TTL),
	})
	for i, w := range in.Waiters {
		out = append(out, model.Lock{
			Kind: model.KindRedis, Name: key, Namespace: ns, Owner: w.Owner, Token: w.Token,
			Mode: "exclusive", WaitStart: w.Since, QueuePos: i + 1, BlockedByOwners: []string{in.Owner},
		})
	}
	return out
}

// expiry is when a TTL read at now runs out, to the millisecond PTTL
// gives, so an unchanged key reads the same expiry from poll to poll.
func expiry(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Round(10 * time.Millisecond)
}

// Bounds of the plain-key scan, as redislock's Inspect bounds its own.
const (
	scanCount = 1000
	maxScans  = 100
)

// plainKeys lists the string keys under the prefix (locks taken with SET
// NX PX), up to the limit less the held locks already listed, with their
// token prefix and TTL: two round trips, SCAN then one pipeline.
func (s *Source) plainKeys(ctx context.Context, now time.Time, listed int) ([]model.Lock, error) {
	room := s.limit - listed
	if room <= 0 {
		return nil, nil
	}
	match := globEscape(s.prefix) + "*"
	var keys []string
	var cursor uint64
	for range maxScans {
		ks, next, err := s.rdb.ScanType(ctx, cursor, match, scanCount, "string").Result()
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
		if len(keys) >= room || next == 0 {
			break
		}
		cursor = next
	}
	if len(keys) > room {
		keys = keys[:room]
	}
	if len(keys) == 0 {
		return nil, nil
	}
	vals := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			vals[i], ttls[i] = p.Get(ctx, k), p.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]model.Lock, 0, len(keys))
	for i, k := range keys {
		v, err := vals[i].Result()
		if err != nil {
			continue // gone since the scan
		}
		tok := v
		if len(tok) > 6 {
			tok = tok[:6]
		}
		l := model.Lock{Kind: model.KindRedis, Name: k, Namespace: registry.NameOf(registry.RedisKey, k),
			Owner: "token " + tok + "…", Token: tok, Mode: "exclusive", Granted: true}
		if ttl := ttls[i].Val(); ttl > 0 {
			l.Expires = expiry(now, ttl)
		}
		out = append(out, l)
	}
	return sortByName(out), nil
}

func sortByName(ls []model.Lock) []model.Lock {
	slices.SortFunc(ls, func(a, b model.Lock) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

// globEscape escapes the glob characters of a SCAN MATCH pattern.
func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// describe makes a poll's error one line for the banner.
func describe(err error) error {
	return errors.New(strings.Join(strings.Fields(err.Error()), " "))
}

// redactURL removes url's password from s.
func redactURL(s, url string) string {
	if at := strings.LastIndexByte(url, '@'); at > 0 {
		if colon := strings.LastIndexByte(url[:at], ':'); colon > 0 && !strings.HasSuffix(url[:colon], "/") {
			if pw := url[colon+1 : at]; pw != "" {
				s = strings.ReplaceAll(s, pw, "***")
			}
		}
	}
	return s
}
