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
	Name    string        // the whole key, prefix + Key (the monitor's lock name)
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
// string keys under it. Each page of SCAN (COUNT 1000) is read in one round
// trip: one pipeline sends the next page's SCAN and reads this page's keys,
// each hold with one HMGET and each waiters' queue with a small read-only
// script that gives its first MaxWaiters+1 entries and their registrations
// (plain string keys, and holds written by an older redislock, take one
// more round trip). It never sends KEYS and is bounded: at most limit locks
// and strings (DefaultLimit when limit <= 0) and at most 100 pages on each
// node (past 100,000 keys on a node it sees part of the keyspace and says
// Truncated), each page's work bounded by its 1,000 keys. On a
// *redis.ClusterClient it reads every primary, on a *redis.Ring every
// shard, at once: a node that fails is named in Table.Down and the others
// are listed. Waiters whose registration has expired (their process died)
// are left out. Tokens leave Redis cut to 6 characters: holds keep their
// first 6 (p), queues' are cut by the script.
func Read(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) (Table, error) {
	return new(Reader).Read(ctx, rdb, prefix, limit)
}

// A Reader reads as Read does, keeping its working memory from one read to
// the next: the table's locks, each node's holds as read, the keys of a
// page. A monitor polling 1,000 locks with Read allocated 320 kB of them a
// poll (an Info is 152 bytes, and each was in two slices), which the
// garbage collector then freed: its share of GC cycles cost more client
// CPU than all of Read's own work (issue 26). The Table a Reader's Read
// returns is valid until its next Read, which reuses its Locks (not their
// Waiters: few locks have any). The zero Reader is ready. A Reader is not
// safe for concurrent use.
type Reader struct {
	free  []*scratch // the nodes' memory, for the next read's nodes
	pages []nodePages
	refs  []lockRef
	locks []Info
}

// scratch is one node's memory in a read.
type scratch struct {
	reads []read
	pages [][]Info // the last read's holds, page by page
}

// Read is Read's, reusing r's memory: see Reader.
func (r *Reader) Read(ctx context.Context, rdb redis.UniversalClient, prefix string, limit int) (Table, error) {
	if prefix == "" {
		return Table{}, errors.New("redislocks: no key prefix")
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	var mu sync.Mutex
	pages := r.pages[:0]
	read := func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		var s *scratch
		if n := len(r.free); n > 0 {
			s, r.free = r.free[n-1], r.free[:n-1]
		} else {
			s = new(scratch)
		}
		mu.Unlock()
		p := inspectNode(ctx, c, prefix, limit, s)
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
	defer func() {
		for i := range pages {
			pages[i].scratch.pages = pages[i].holds
			r.free = append(r.free, pages[i].scratch)
		}
		clear(pages) // their queues and errors
		r.pages = pages[:0]
	}()
	if err != nil {
		return Table{}, fmt.Errorf("redislocks: %w", err)
	}
	return r.merge(pages, prefix, limit)
}

// A page of Read on one node is one pipeline: the next page's SCAN, TIME,
// and for each key of this page, by what it is:
//   - a hold (prefix + key): HMGET of p (the token's first 6 characters),
//     f, o, s and e (the expiry redislock keeps beside every PEXPIRE). A
//     pipeline reads holds with no per-key script: Redis spends more CPU on
//     a command run from Lua than on one in a pipeline, and the hold's
//     fields are all a monitor needs, none a capability. Measured again for
//     issue 26 (BenchmarkInspect, 1,000 holds): a read-only script per page
//     (#!lua flags=no-writes,allow-cross-slot-keys) that ran SCAN itself
//     and answered one flat array, parsed raw, cut the client's allocations
//     from 21,000 to 93 a read, but Redis spent 14–20 ms of CPU a read
//     against the pipeline's 8, and a read took 50–77 ms against 29–41.
//   - a waiters' queue ({tag} prefix q: key): queueScript, which cuts the
//     tokens (whole ones are capabilities) to 6 characters in Redis. It is
//     sent by its SHA1 (EVALSHA), not whole (EVAL, 400 bytes a queue);
//     a node that does not have it cached (never run there, restarted,
//     a replica promoted by a failover, SCRIPT FLUSH, or evicted: Redis
//     7.4 keeps only the last 500 scripts loaded by EVAL) answers NOSCRIPT,
//     and that queue is read with EVAL in the second pipeline, which
//     caches it. Read talks to each node of a cluster with its own client,
//     so a node's cache is the one asked.
//
// What the HMGET cannot answer is read in a second pipeline, rare: a plain
// string key (WRONGTYPE: GETRANGE 0 5 and PTTL) and a hold written by a
// redislock without p or e (holdScript).

// queueScript: KEYS queue, registrations; ARGV MaxWaiters. Returns token[:6],
// score and registration of the first MaxWaiters+1 waiters, flat.
var queueScript = redis.NewScript(`
local z = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]), 'WITHSCORES')
if #z == 0 then return {} end
local toks, out = {}, {}
for i = 1, #z, 2 do toks[#toks + 1] = z[i] end
local regs = redis.call('HMGET', KEYS[2], unpack(toks))
for i = 1, #toks do
  out[#out + 1], out[#out + 2], out[#out + 3] = string.sub(toks[i], 1, 6), z[2 * i], regs[i]
end
return out
`)

// holdScript: KEYS hold. Returns {token[:6], fence, owner, since, pttl}, or
// nil when the key holds no lock.
var holdScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 't', 'f', 'o', 's')
if not h[1] then return false end
return {string.sub(h[1], 1, 6), h[2], h[3], h[4], redis.call('PTTL', KEYS[1])}
`)

// nodePages is what Read got from one node.
type nodePages struct {
	addr      string
	taken     time.Time
	scratch   *scratch // the memory it read into, the Reader's
	holds     [][]Info // a slice per page, of its size: never copied to grow
	nholds    int      // the holds in them
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

// read is one key's read in a page's pipeline.
type read struct {
	key   string // the full key
	lock  string // the lock's key, without the prefix
	hold  *redis.SliceCmd
	queue *redis.Cmd
	w     string // the queue's registrations key
}

// inspectNode reads one node page by page until the scan ends, limit
// holds and strings are listed, or maxScans pages are read: one round
// trip per page (and one more for the first SCAN).
func inspectNode(ctx context.Context, c *redis.Client, prefix string, limit int, s *scratch) nodePages {
	p := nodePages{addr: c.Options().Addr, scratch: s, holds: s.pages[:0], queues: map[string][]queued{}}
	match := "*" + globEscape(prefix) + "*"
	keys, cursor, err := c.Scan(ctx, 0, match, scanCount).Result()
	if err != nil {
		p.err = err
		return p
	}
	reads := slices.Grow(s.reads[:0], len(keys))
	defer func() {
		// Kept, the reads' commands (go-redis's replies) would stay on
		// the heap until the next read, for every GC cycle to mark: after
		// a Source's poll of 1,000 locks the live heap was 285 kB larger.
		clear(reads[:cap(reads)])
		s.reads = reads[:0]
	}()
	for page := 1; ; page++ {
		pipe := c.Pipeline()
		var next *redis.ScanCmd
		if cursor != 0 && page < maxScans {
			next = pipe.Scan(ctx, cursor, match, scanCount)
		}
		clock := pipe.Time(ctx)
		reads = reads[:0]
		for _, k := range keys {
			if key, ok := strings.CutPrefix(k, prefix); ok {
				reads = append(reads, read{key: k, lock: key, hold: pipe.HMGet(ctx, k, "p", "f", "o", "s", "e")})
			} else if key, w, ok := queueKeys(k, prefix); ok {
				reads = append(reads, read{key: k, lock: key, w: w, queue: queueScript.EvalSha(ctx, pipe, []string{k, w}, MaxWaiters)})
			}
		}
		_, _ = pipe.Exec(ctx) // each command's error is its own
		if err := clock.Err(); err != nil {
			p.err = err
			return p
		}
		now := clock.Val()
		p.taken = now
		if err := p.collect(ctx, c, prefix, reads, now); err != nil {
			p.err = err
			return p
		}
		if next == nil {
			p.truncated = cursor != 0
			return p
		}
		if keys, cursor, err = next.Result(); err != nil {
			p.err = err
			return p
		}
		if p.nholds+len(p.strs)+len(p.unread) >= limit {
			p.truncated = true
			return p
		}
	}
}

// collect adds one page's reads to p, reading in a second pipeline what
// the first could not: plain strings, holds written without p or e, and
// queues whose node did not have queueScript cached.
func (p *nodePages) collect(ctx context.Context, c *redis.Client, prefix string, reads []read, now time.Time) error {
	type plain struct {
		key  string
		val  *redis.StringCmd
		pttl *redis.DurationCmd
	}
	type old struct {
		key  string
		hold *redis.Cmd
	}
	var strs []plain
	var olds []old
	var queues []read // read again with EVAL
	var pipe redis.Pipeliner
	later := func() redis.Pipeliner {
		if pipe == nil {
			pipe = c.Pipeline()
		}
		return pipe
	}
	nowms := now.UnixMilli()
	holds := p.page(len(reads))
	defer func() {
		p.holds = append(p.holds, holds)
		p.nholds += len(holds)
	}()
	for _, r := range reads {
		if r.queue != nil {
			if redis.HasErrorPrefix(r.queue.Err(), "NOSCRIPT") {
				r.queue = queueScript.Eval(ctx, later(), []string{r.key, r.w}, MaxWaiters)
				queues = append(queues, r)
				continue
			}
			p.queue(r)
			continue
		}
		v, err := r.hold.Result()
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
			pl := later()
			strs = append(strs, plain{key: r.key, val: pl.GetRange(ctx, r.key, 0, 5), pttl: pl.PTTL(ctx, r.key)})
			continue
		case err != nil:
			p.unread, p.why = append(p.unread, r.key), err.Error()
			continue
		case len(v) < 5 || (v[0] == nil && v[1] == nil):
			continue // gone since the SCAN
		case v[0] == nil || v[4] == nil:
			olds = append(olds, old{key: r.key, hold: holdScript.Eval(ctx, later(), []string{r.key})})
			continue
		}
		exp, _ := strconv.ParseInt(str(v[4]), 10, 64)
		holds = append(holds, hold(prefix, r.key, str(v[0]), str(v[1]), str(v[2]), str(v[3]), exp-nowms))
	}
	if pipe == nil {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) && len(strs)+len(olds)+len(queues) > 0 {
		if _, ok := err.(redis.Error); !ok {
			return err // the connection, not a key
		}
	}
	for _, s := range strs {
		v, err := s.val.Result()
		if err != nil {
			continue // gone, or no longer a string
		}
		ttl, _ := s.pttl.Result()
		p.strs = append(p.strs, StringKey{Key: strings.TrimPrefix(s.key, prefix), Token: v, TTL: max(ttl, 0)})
	}
	for _, r := range queues {
		p.queue(r)
	}
	for _, o := range olds {
		h, err := o.hold.Slice()
		if err != nil || len(h) < 5 {
			continue // gone since the SCAN
		}
		pttl, _ := h[4].(int64)
		holds = append(holds, hold(prefix, o.key, str(h[0]), str(h[1]), str(h[2]), str(h[3]), pttl))
	}
	return nil
}

// page returns the memory for the holds of p's next page, n at most: the
// same page's of the Reader's last read when it has room.
func (p *nodePages) page(n int) []Info {
	if i := len(p.holds); i < cap(p.holds) {
		if b := p.holds[:i+1][i]; cap(b) >= n {
			return b[:0]
		}
	}
	return make([]Info, 0, n)
}

// queue adds the waiters a queue's read answered.
func (p *nodePages) queue(r read) {
	q, err := r.queue.Slice()
	if err != nil {
		return // not a queue after all (WRONGTYPE), or unreadable: the hold says why
	}
	for i := 0; i+2 < len(q); i += 3 {
		score, _ := strconv.ParseFloat(str(q[i+1]), 64)
		p.queues[r.lock] = append(p.queues[r.lock], queued{tok: str(q[i]), score: score, reg: str(q[i+2])})
	}
}

// hold is one held lock as read, name its whole key: ttl in ms.
func hold(prefix, name, tok, fence, owner, since string, ttl int64) Info {
	f, _ := strconv.ParseInt(fence, 10, 64)
	s, _ := strconv.ParseInt(since, 10, 64)
	key := strings.TrimPrefix(name, prefix)
	return Info{Key: key, Name: name, Pattern: registry.RedisPattern(prefix, key), Owner: owner, Fence: f, Token: tok,
		Since: time.UnixMilli(s), TTL: time.Duration(max(ttl, 0)) * time.Millisecond}
}

// queueKeys reads a waiters' queue key, "{tag}" + prefix + "q:" + key: the
// lock's key and its registrations' key ("{tag}" + prefix + "w:" + key).
func queueKeys(k, prefix string) (key, w string, ok bool) {
	if !strings.HasPrefix(k, "{") {
		return "", "", false
	}
	e := strings.IndexByte(k, '}')
	if e < 1 {
		return "", "", false
	}
	key, ok = strings.CutPrefix(k[e+1:], prefix+"q:")
	if !ok {
		return "", "", false
	}
	return key, k[:e+1] + prefix + "w:" + key, true
}

// merge joins the nodes' pages into one table: every answering node's
// locks with their waiters, by key, cut at limit, in r's locks. Each lock
// is copied once, from its page into its place in the table (an Info is
// large: building the table unsorted, then sorted, copied 1,000 of them
// twice a read).
func (r *Reader) merge(pages []nodePages, prefix string, limit int) (Table, error) {
	var t Table
	var errs []error
	answered := 0
	n := 0
	for i := range pages {
		n += pages[i].nholds + len(pages[i].unread)
	}
	refs := slices.Grow(r.refs[:0], n)
	defer func() { r.refs = refs[:0] }()
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
		if len(p.unread) > 0 {
			unread := make([]Info, len(p.unread))
			for j, k := range p.unread {
				key := strings.TrimPrefix(k, prefix)
				unread[j] = Info{Key: key, Name: k, Pattern: registry.RedisPattern(prefix, key), Unread: true}
			}
			p.holds = append(p.holds, unread)
			p.nholds += len(unread)
			t.Down = append(t.Down, NodeError{Addr: p.addr, Listed: true, Err: errors.New(p.why)})
		}
		for _, holds := range p.holds {
			for j := range holds {
				refs = append(refs, lockRef{in: &holds[j], p: p})
			}
		}
		t.Strings = append(t.Strings, p.strs...)
	}
	if answered == 0 && len(errs) > 0 {
		return Table{}, fmt.Errorf("redislocks: %w", errors.Join(errs...))
	}
	slices.SortFunc(refs, func(a, b lockRef) int { return cmp.Compare(a.in.Key, b.in.Key) })
	// SCAN may return a key twice.
	refs = slices.CompactFunc(refs, func(a, b lockRef) bool { return a.in.Key == b.in.Key })
	if len(refs) > limit {
		refs, t.Truncated = refs[:limit], true
	}
	if cap(r.locks) < len(refs) {
		r.locks = append(r.locks[:cap(r.locks)], make([]Info, len(refs)-cap(r.locks))...)
	}
	t.Locks = r.locks[:len(refs)]
	for i, ref := range refs {
		in := &t.Locks[i]
		*in = *ref.in
		if !in.Unread {
			ref.p.waiters(in)
		}
	}
	slices.SortFunc(t.Strings, func(a, b StringKey) int { return cmp.Compare(a.Key, b.Key) })
	t.Strings = slices.CompactFunc(t.Strings, func(a, b StringKey) bool { return a.Key == b.Key })
	if room := limit - len(t.Locks); len(t.Strings) > room {
		t.Strings, t.Truncated = t.Strings[:room], true
	}
	slices.SortFunc(t.Down, func(a, b NodeError) int { return cmp.Compare(a.Addr, b.Addr) })
	return t, nil
}

// lockRef is a hold in merge's pages, and its page.
type lockRef struct {
	in *Info
	p  *nodePages
}

// waiters sets in's live waiters from p's queue of its key.
func (p *nodePages) waiters(in *Info) {
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
