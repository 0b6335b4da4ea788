// Package redissource is the monitor's Redis source: seed 002's session
// mutexes under one key prefix, read with internal/source/redislocks (SCAN,
// never KEYS, one round trip per page of keys, bounded per poll; a Reader
// kept from poll to poll, so a poll allocates little beyond its rows) as
// model locks of kind redis, with owner, token prefix, fence, TTL and the
// registered waiters in order. Keys under the prefix that are plain
// strings, as a service that takes the lock with `SET key token NX PX ms`
// leaves them, are listed too: their owner is unknown, their token prefix
// and TTL are shown.
//
// The Redis is named by a URL (internal/connect.ParseRedis): a single
// Redis, a Cluster (found by asking the node, or named by several seeds)
// or Sentinel-managed primaries. On a Cluster every primary is read at
// once; a primary that does not answer is named in the snapshot's Partial
// (a banner line of its own) while the others' locks are listed.
package redissource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/internal/source/redislocks"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/connect"
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
	// Limit bounds the locks listed per poll (redislocks.DefaultLimit
	// when 0), plain string keys included.
	Limit int
}

// Source reads one Redis's session mutexes. It is safe for concurrent use.
type Source struct {
	target *connect.RedisTarget // nil when made by New
	url    string               // what Open was given; its password never leaves in an error
	prefix string
	limit  int

	mu  sync.Mutex
	rdb redis.UniversalClient // made at the first poll that reaches Redis

	// reader is the last poll's, its memory kept for the next: a poll
	// takes it (or, when another poll has it, makes one) and puts it back.
	reader atomic.Pointer[redislocks.Reader]
}

// ErrURL is a --redis URL that cannot be used.
var ErrURL = connect.ErrRedisURL

// Open returns a Source for the Redis that url names (connect.ParseRedis).
// It does not connect: a Redis that is down is a failed poll, on its own
// banner, not a failed start; the first poll that reaches it makes the
// client (and learns whether it is a Cluster node).
func Open(url string, opts Options) (*Source, error) {
	t, err := connect.ParseRedis(url)
	if err != nil {
		return nil, err
	}
	s := New(nil, opts)
	s.target, s.url = t, url
	return s, nil
}

// New returns a Source reading through rdb (a *redis.Client,
// *redis.ClusterClient or *redis.Ring, which Close closes).
func New(rdb redis.UniversalClient, opts Options) *Source {
	if opts.Prefix == "" {
		opts.Prefix = redislock.DefaultPrefix
	}
	if opts.Limit <= 0 {
		opts.Limit = redislocks.DefaultLimit
	}
	return &Source{rdb: rdb, prefix: opts.Prefix, limit: opts.Limit}
}

// Name is "redis".
func (s *Source) Name() string { return Name }

// Close closes the client.
func (s *Source) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
}

// client returns the client, making it on first use.
func (s *Source) client(ctx context.Context) (redis.UniversalClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rdb == nil {
		rdb, err := s.target.Client(ctx, connect.RedisTuning{ClientName: "locktop.monitor", PoolSize: 2, MaxRetries: -1})
		if err != nil {
			return nil, err
		}
		s.rdb = rdb
	}
	return s.rdb, nil
}

// Poll lists the locks once: each held lock's holder, then its waiters in
// the order they will get it, timed by Redis's clock; then the plain
// string keys.
func (s *Source) Poll(ctx context.Context) (model.Snapshot, error) {
	start := time.Now()
	rdb, err := s.client(ctx)
	if err != nil {
		return model.Snapshot{}, s.describe(err)
	}
	rd := s.reader.Swap(nil)
	if rd == nil {
		rd = new(redislocks.Reader)
	}
	defer s.reader.Store(rd) // once t, in rd's memory, is read
	t, err := rd.Read(ctx, rdb, s.prefix, s.limit)
	if err != nil {
		return model.Snapshot{}, s.describe(err)
	}
	snap := model.Snapshot{Taken: t.Taken, Truncated: t.Truncated}
	// One slice of the final size, zeroed, each row's fields set in place:
	// a model.Lock is large, and growing the slice lock by lock was a
	// quarter of a poll's CPU at 1,000 locks, copying each built row into
	// it a tenth (issue 26).
	n := len(t.Strings)
	for i := range t.Locks {
		n += 1 + len(t.Locks[i].Waiters)
	}
	snap.Locks = make([]model.Lock, n)
	n = 0
	for i := range t.Locks {
		n += setLocks(snap.Locks[n:], &t.Locks[i], t.Taken)
	}
	setPlainKeys(snap.Locks[n:], s.prefix, t.Strings, t.Taken)
	for _, d := range t.Down {
		snap.Partial = append(snap.Partial, s.describe(&d).Error())
	}
	snap.Latency = time.Since(start)
	redislog.Healthy() // go-redis's next failure is news again
	return snap, nil
}

// setLocks sets one lock's holder row and its waiters' in out (zero
// Locks, room for 1 + len(in.Waiters)) and says how many it set.
func setLocks(out []model.Lock, in *redislocks.Info, now time.Time) int {
	key := in.Name // as listed: not prefix + in.Key built again per row
	ns := registry.NameOf(registry.RedisKey, key)
	h := &out[0]
	h.Kind, h.Name, h.Namespace, h.Mode, h.Granted = model.KindRedis, key, ns, "exclusive", true
	if in.Unread {
		// Listed by its node, which refused to read it: Partial says why.
		h.Owner = "(not read)"
		return 1
	}
	h.Owner, h.Token, h.Fence, h.HeldSince, h.Expires = in.Owner, in.Token, in.Fence, in.Since, expiry(now, in.TTL)
	if len(in.Waiters) == 0 {
		return 1
	}
	// The waiters of one key wait for the same holder: they share one
	// slice (an allocation per key, not per waiter), never written.
	blockers := []string{in.Owner}
	for i, w := range in.Waiters {
		l := &out[1+i]
		l.Kind, l.Name, l.Namespace, l.Owner, l.Token = model.KindRedis, key, ns, w.Owner, w.Token
		l.Mode, l.WaitStart, l.QueuePos, l.BlockedByOwners = "exclusive", w.Since, i+1, blockers
	}
	return 1 + len(in.Waiters)
}

// expiry is when a TTL read at now runs out, to the millisecond PTTL
// gives, so an unchanged key reads the same expiry from poll to poll.
func expiry(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Round(10 * time.Millisecond)
}

// setPlainKeys sets the string keys under the prefix (locks taken with
// SET NX PX) in out (zero Locks, one per key) as locks with their token
// prefix and TTL, in the keys' order (Read's: by key).
func setPlainKeys(out []model.Lock, prefix string, keys []redislocks.StringKey, now time.Time) {
	for i, k := range keys {
		l := &out[i]
		l.Kind, l.Name, l.Mode, l.Granted = model.KindRedis, prefix+k.Key, "exclusive", true
		l.Namespace = registry.NameOf(registry.RedisKey, l.Name)
		l.Owner, l.Token = "token "+k.Token+"…", k.Token
		if k.TTL > 0 {
			l.Expires = expiry(now, k.TTL)
		}
	}
}

// describe makes an error one line for the banner, without the URL's
// password.
func (s *Source) describe(err error) error {
	return errors.New(connect.RedactRedisURL(strings.Join(strings.Fields(err.Error()), " "), s.url))
}

// ForceRelease deletes the hold of the lock named name (its full key, as
// model.Lock.Name) through lockcore/redislock's audited path: the audit
// stream records actor and reason beside the victim, whose Locker finds its
// lock lost. It reports an error for a name outside the prefix, and
// redislock.ErrNotHeld when nobody held it.
func (s *Source) ForceRelease(ctx context.Context, name, actor, reason string) error {
	key, ok := strings.CutPrefix(name, s.prefix)
	if !ok {
		return fmt.Errorf("redis: %q is not a lock under the prefix %q", name, s.prefix)
	}
	rdb, err := s.client(ctx)
	if err != nil {
		return s.describe(err)
	}
	l := redislock.New(rdb, redislock.Options{Prefix: s.prefix, Owner: actor})
	defer l.Close()
	released, err := l.ForceRelease(ctx, key, reason)
	if err != nil {
		return s.describe(err)
	}
	if !released {
		return fmt.Errorf("redis: %s: %w", name, redislock.ErrNotHeld)
	}
	return nil
}
