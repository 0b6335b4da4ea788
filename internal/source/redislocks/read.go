package redislocks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/lockcore/registry"
)

// Table is the session locks under one prefix at one instant, as Read
// reads them.
type Table struct {
	Taken time.Time // Redis's clock at the read (the latest of the nodes')
	Locks []Info    // by key
	// Strings are the keys under the prefix that hold a plain string, as a
	// service that locks with SET key token NX PX leaves them, by key.
	Strings []StringKey
	// Truncated says the listing stopped at a bound (the limit, or the SCAN
	// bound on a node): there may be more locks than Locks.
	Truncated bool
	// Down are the nodes (of a Cluster or a Ring) that did not answer, or
	// listed their keys but refused to read them: their locks are missing
	// from Locks, or listed Unread. Read fails only when no node answers.
	Down []NodeError
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
	// Unread says the node listed the key but refused to read it (a Cluster
	// whose state is fail answers CLUSTERDOWN): only Key and Pattern are set,
	// and Table.Down says why.
	Unread bool
}

// Waiter is one registered waiter of a lock.
type Waiter struct {
	Owner string    // the waiter's Locker Owner
	Token string    // the first 6 characters of its token
	Since time.Time // when it began to wait, by Redis's clock
}

// StringKey is a plain string key under the prefix.
type StringKey struct {
	Key   string        // without the prefix
	Token string        // the first 6 characters of the value
	TTL   time.Duration // time left; 0 when the key has none
}

// NodeError is a node Read could not list or read.
type NodeError struct {
	Addr   string // host:port, or the socket's path
	Listed bool   // it listed its keys (Unread in Locks) but refused to read them
	Err    error
}

func (e *NodeError) Error() string {
	if e.Listed {
		return e.Addr + ": keys listed, not read: " + e.Err.Error()
	}
	return e.Addr + ": " + e.Err.Error()
}

func (e *NodeError) Unwrap() error { return e.Err }

// Bounds of one Read.
const (
	DefaultLimit = 1000 // locks, when Read's limit is 0
	MaxWaiters   = 100  // waiters read per lock
	scanCount    = 1000 // SCAN's COUNT
	maxScans     = 100  // SCAN calls per node: at most 100,000 keys looked at per node
)

// Read lists the locks redislock holds under prefix (a Locker's
// Options.Prefix: redislock.DefaultPrefix unless set), and the plain
// string keys under it. Each page of SCAN is read in one round trip: a read-only script scans one page (COUNT 1000) and
// reads, for each key of the page, its hold (HMGET, PTTL) or string (GET,
// PTTL) and, for each waiters' queue, its first MaxWaiters+1 entries
// (ZRANGE) and their registrations (HMGET). It never sends KEYS and is
// bounded: at most limit locks and strings (DefaultLimit when limit
// <= 0) and at most 100 pages on each node (past 100,000 keys on a node it
// sees part of the keyspace and says Truncated), each page's work bounded
// by its 1,000 keys. On a *redis.ClusterClient it reads every primary, on
// a *redis.Ring every shard, at once: a node that fails is named in
// Table.Down and the others are listed. Waiters whose registration has
// expired (their process died) are left out. Tokens leave Redis cut to 6
// characters.
func Read(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) (Table, error) {
	if prefix == "" {
		return Table{}, errors.New("redislocks: no key prefix")
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	var (
		mu    sync.Mutex
		pages []nodePages
	)
	read := func(ctx context.Context, c *redis.Client) error {
		p := inspectNode(ctx, c, prefix, limit)
		mu.Lock()
		pages = append(pages, p)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Ring:
		err = c.ForEachShard(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		return Table{}, fmt.Errorf("redislocks: a %T cannot be read node by node", rdb)
	}
	if err != nil {
		return Table{}, fmt.Errorf("redislocks: %w", err)
	}
	return merge(pages, prefix, limit)
}

// inspectPage is one page of Read on one node. ARGV: cursor, match,
// count, prefix, MaxWaiters. It returns the next cursor, TIME, the holds
// (key, token[:6], fence, owner, since, pttl each), the strings (key,
// value[:6], pttl each), the queues (lock key, n, then token[:6], score,
// registration n times each), the keys whose reads were refused, and the
// refusal. It reads only; keys are not declared (they are found by the
// scan), so it runs on the node it is sent to.
var inspectPage = redis.NewScript(`
local prefix, maxw = ARGV[4], tonumber(ARGV[5])
local n = #prefix
local page = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local holds, strs, queues, unread, why = {}, {}, {}, {}, false
for _, k in ipairs(page[2]) do
  if string.sub(k, 1, n) == prefix then
    local h = redis.pcall('HMGET', k, 't', 'f', 'o', 's')
    if h.err then
      if string.sub(h.err, 1, 9) == 'WRONGTYPE' then
        local v = redis.pcall('GET', k)
        if type(v) == 'string' then
          local i = #strs
          strs[i + 1], strs[i + 2], strs[i + 3] = k, string.sub(v, 1, 6), redis.call('PTTL', k)
        end
      else
        unread[#unread + 1], why = k, h.err
      end
    elseif h[1] then
      local i = #holds
      holds[i + 1], holds[i + 2], holds[i + 3] = k, string.sub(h[1], 1, 6), h[2]
      holds[i + 4], holds[i + 5], holds[i + 6] = h[3], h[4], redis.call('PTTL', k)
    end
  elseif string.sub(k, 1, 1) == '{' then
    local e = string.find(k, '}', 2, true)
    if e and string.sub(k, e + 1, e + n + 2) == prefix .. 'q:' then
      local z = redis.pcall('ZRANGE', k, 0, maxw, 'WITHSCORES')
      if not z.err and #z > 0 then
        local key, toks = string.sub(k, e + n + 3), {}
        for i = 1, #z, 2 do toks[#toks + 1] = z[i] end
        local regs = redis.call('HMGET', string.sub(k, 1, e) .. prefix .. 'w:' .. key, unpack(toks))
        queues[#queues + 1], queues[#queues + 2] = key, #toks
        for i = 1, #toks do
          local j = #queues
          queues[j + 1], queues[j + 2], queues[j + 3] = string.sub(toks[i], 1, 6), z[2 * i], regs[i]
        end
      end
    end
  end
end
return {page[1], redis.call('TIME'), holds, strs, queues, unread, why}
`)

// nodePages is what Read got from one node.
type nodePages struct {
	addr      string
	taken     time.Time
	holds     []Info
	strs      []StringKey
	queues    map[string][]queued // by lock key
	unread    []string            // full keys
	why       string
	truncated bool
	err       error
}

type queued struct {
	tok, reg string
	score    float64
}

// inspectNode reads one node page by page until the scan ends, limit
// holds and strings are listed, or maxScans pages are read.
func inspectNode(ctx context.Context, c *redis.Client, prefix string, limit int) nodePages {
	p := nodePages{addr: c.Options().Addr, queues: map[string][]queued{}}
	match := "*" + globEscape(prefix) + "*"
	cursor := "0"
	for range maxScans {
		v, err := inspectPage.Run(ctx, c, nil, cursor, match, scanCount, prefix, MaxWaiters).Slice()
		if err != nil {
			p.err = err
			return p
		}
		if len(v) < 6 {
			p.err = fmt.Errorf("inspect script answered %d values", len(v))
			return p
		}
		cursor = str(v[0])
		if t, ok := v[1].([]any); ok && len(t) == 2 {
			sec, _ := strconv.ParseInt(str(t[0]), 10, 64)
			usec, _ := strconv.ParseInt(str(t[1]), 10, 64)
			p.taken = time.Unix(sec, usec*1000)
		}
		h, _ := v[2].([]any)
		for i := 0; i+5 < len(h); i += 6 {
			fence, _ := strconv.ParseInt(str(h[i+2]), 10, 64)
			since, _ := strconv.ParseInt(str(h[i+4]), 10, 64)
			ttl, _ := h[i+5].(int64)
			key := strings.TrimPrefix(str(h[i]), prefix)
			p.holds = append(p.holds, Info{Key: key, Pattern: registry.RedisPattern(prefix, key), Owner: str(h[i+3]), Fence: fence,
				Token: str(h[i+1]), Since: time.UnixMilli(since), TTL: time.Duration(max(ttl, 0)) * time.Millisecond})
		}
		s, _ := v[3].([]any)
		for i := 0; i+2 < len(s); i += 3 {
			ttl, _ := s[i+2].(int64)
			p.strs = append(p.strs, StringKey{Key: strings.TrimPrefix(str(s[i]), prefix), Token: str(s[i+1]),
				TTL: time.Duration(max(ttl, 0)) * time.Millisecond})
		}
		q, _ := v[4].([]any)
		for i := 0; i+1 < len(q); {
			key := str(q[i])
			n, _ := q[i+1].(int64)
			for i += 2; n > 0 && i+2 < len(q); n, i = n-1, i+3 {
				score, _ := strconv.ParseFloat(str(q[i+1]), 64)
				p.queues[key] = append(p.queues[key], queued{tok: str(q[i]), score: score, reg: str(q[i+2])})
			}
		}
		u, _ := v[5].([]any)
		for _, k := range u {
			p.unread = append(p.unread, str(k))
		}
		if len(v) > 6 && v[6] != nil {
			p.why = str(v[6])
		}
		if cursor == "0" {
			return p
		}
		if len(p.holds)+len(p.strs)+len(p.unread) >= limit {
			p.truncated = true
			return p
		}
	}
	p.truncated = true
	return p
}

// merge joins the nodes' pages into one table: every answering node's
// locks with their waiters, by key, cut at limit.
func merge(pages []nodePages, prefix string, limit int) (Table, error) {
	var t Table
	var errs []error
	answered := 0
	for i := range pages {
		p := &pages[i]
		if p.err != nil {
			ne := NodeError{Addr: p.addr, Err: p.err}
			t.Down = append(t.Down, ne)
			errs = append(errs, &ne)
			continue
		}
		answered++
		if p.taken.After(t.Taken) {
			t.Taken = p.taken
		}
		t.Truncated = t.Truncated || p.truncated
		for j := range p.holds {
			in := p.holds[j]
			q := p.queues[in.Key]
			if len(q) > MaxWaiters {
				q, in.MoreWaiters = q[:MaxWaiters], true
			}
			for _, w := range q {
				deadline, _, owner, ok := parseRegistration(w.reg)
				// Alive while deadline >= the clock in whole ms, as the
				// scripts' head() judges it.
				if !ok || (!p.taken.IsZero() && deadline.Before(p.taken.Truncate(time.Millisecond))) {
					continue
				}
				in.Waiters = append(in.Waiters, Waiter{Owner: owner, Token: w.tok, Since: time.UnixMicro(int64(w.score))})
			}
			t.Locks = append(t.Locks, in)
		}
		for _, k := range p.unread {
			key := strings.TrimPrefix(k, prefix)
			t.Locks = append(t.Locks, Info{Key: key, Pattern: registry.RedisPattern(prefix, key), Unread: true})
		}
		if len(p.unread) > 0 {
			t.Down = append(t.Down, NodeError{Addr: p.addr, Listed: true, Err: errors.New(p.why)})
		}
		t.Strings = append(t.Strings, p.strs...)
	}
	if answered == 0 && len(errs) > 0 {
		return Table{}, fmt.Errorf("redislocks: %w", errors.Join(errs...))
	}
	// SCAN may return a key twice.
	slices.SortFunc(t.Locks, func(a, b Info) int { return cmp.Compare(a.Key, b.Key) })
	t.Locks = slices.CompactFunc(t.Locks, func(a, b Info) bool { return a.Key == b.Key })
	slices.SortFunc(t.Strings, func(a, b StringKey) int { return cmp.Compare(a.Key, b.Key) })
	t.Strings = slices.CompactFunc(t.Strings, func(a, b StringKey) bool { return a.Key == b.Key })
	if len(t.Locks) > limit {
		t.Locks, t.Truncated = t.Locks[:limit], true
	}
	if room := limit - len(t.Locks); len(t.Strings) > room {
		t.Strings, t.Truncated = t.Strings[:room], true
	}
	slices.SortFunc(t.Down, func(a, b NodeError) int { return cmp.Compare(a.Addr, b.Addr) })
	return t, nil
}

func str(x any) string { s, _ := x.(string); return s }

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

// globEscape escapes SCAN MATCH's special characters.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}
