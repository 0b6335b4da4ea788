package redislocks

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// BenchmarkInspect is the one-pane figure's Redis pair in miniature: Read
// of 1,000 held locks (every field read) beside a bare SCAN loop over the
// same prefix, and beside the bare read of every field (the SCAN loop with,
// per page, a pipeline of one HMGET per hold, decoded by go-redis and
// dropped). Compare them in one run (-count 5): the issue 26 budget is Read
// ≤ 2× the bare SCAN loop; DESIGN's is 1.3× the bare read.
//
// Two more are the floors of the designs issue 26 names for going below a
// command per key, measured before building either: index-hscan reads one
// hash of 1,000 entries of a hold's fields (an index the lock's scripts
// would keep per prefix) with HSCAN COUNT 1000; tracked-idle is a poll
// that client-side tracking has told nothing changed: TIME alone. On one
// Redis (2026-11-26, shared 2-core box, -count 3) index-hscan took
// 1.5–1.7 ms beside bare-scan's 2.2–2.5 ms, and tracked-idle 52–67 µs. On a
// Cluster an index would have to share each hold's slot (the scripts touch
// one slot), i.e. up to one index per slot: about a key per lock again.
func BenchmarkInspect(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Client(b)
	prefix := redistest.Prefix(b)
	l := redislock.New(rdb, redislock.Options{Prefix: prefix, TTL: 10 * time.Minute})
	defer l.Close()
	for i := range 1000 {
		if _, err := l.TryAcquire(ctx, "bench:"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("inspect", func(b *testing.B) {
		defer redistest.ServerCPU(b, rdb)()
		for b.Loop() {
			if t, err := Read(ctx, rdb, prefix, 0); err != nil || len(t.Locks) != 1000 {
				b.Fatalf("%d locks, %v", len(t.Locks), err)
			}
		}
	})
	b.Run("bare-read", func(b *testing.B) {
		defer redistest.ServerCPU(b, rdb)()
		for b.Loop() {
			var cursor uint64
			for {
				keys, next, err := rdb.Scan(ctx, cursor, globEscape(prefix)+"*", scanCount).Result()
				if err != nil {
					b.Fatal(err)
				}
				p := rdb.Pipeline()
				for _, k := range keys {
					p.HMGet(ctx, k, "p", "f", "o", "s", "e")
				}
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
				if next == 0 {
					break
				}
				cursor = next
			}
		}
	})
	idx := "{" + prefix + "}idx"
	for i := range 1000 {
		// key -> "p f o s e", the size of a hold's fields as HMGET reads them.
		if err := rdb.HSet(ctx, idx, "bench:"+strconv.Itoa(i), "AbCdEf 1764193000123456 bench-owner 1764193000123 1764193600123").Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("index-hscan", func(b *testing.B) {
		for b.Loop() {
			var cursor uint64
			n := 0
			for {
				kv, next, err := rdb.HScan(ctx, idx, cursor, "", scanCount).Result()
				if err != nil {
					b.Fatal(err)
				}
				n += len(kv) / 2
				if next == 0 {
					break
				}
				cursor = next
			}
			if n != 1000 {
				b.Fatalf("%d entries", n)
			}
		}
	})
	b.Run("tracked-idle", func(b *testing.B) {
		for b.Loop() {
			if err := rdb.Time(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare-scan", func(b *testing.B) {
		defer redistest.ServerCPU(b, rdb)()
		for b.Loop() {
			var cursor uint64
			for {
				_, next, err := rdb.Scan(ctx, cursor, globEscape(prefix)+"*", scanCount).Result()
				if err != nil {
					b.Fatal(err)
				}
				if next == 0 {
					break
				}
				cursor = next
			}
		}
	})
}

// BenchmarkInspectQueued is Read of 1,000 held locks each with a queue of
// three waiters (the one-pane load's queues, on every lock): a page's
// pipeline carries a queueScript call per queue beside the HMGET per hold,
// so it measures what sending the script by SHA1 (EVALSHA) instead of
// whole (EVAL) saves. The queues are written as redislock writes them, with
// registrations that do not lapse during the run. On 2026-11-27 (shared
// 2-core box at load 11-15, 9 alternating rounds of 1 s, old and new test
// binaries) a read sent 282 KB with EVALSHA against 599 KB with EVAL
// (0.47x in every round); its time and Redis's CPU were within the noise:
// medians 45.2 against 42.4 ms (per-round ratio 0.96, spread 0.52-1.56)
// and 20.3 against 18.9 ms of server CPU (0.93, 0.75-1.43).
func BenchmarkInspectQueued(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.Client(b)
	prefix := redistest.Prefix(b)
	l := redislock.New(rdb, redislock.Options{Prefix: prefix, TTL: 10 * time.Minute})
	defer l.Close()
	deadline := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	for i := range 1000 {
		key := "bench:" + strconv.Itoa(i)
		if _, err := l.TryAcquire(ctx, key); err != nil {
			b.Fatal(err)
		}
		q, w := "{t}"+prefix+"q:"+key, "{t}"+prefix+"w:"+key
		p := rdb.Pipeline()
		for j := range 3 {
			tok := fmt.Sprintf("waiter%04d%d-token-token", i, j)
			p.ZAdd(ctx, q, redis.Z{Score: float64(1764193000123456 + j), Member: tok})
			p.HSet(ctx, w, tok, deadline+" 30000 "+prefix+"notice:x bench-waiter")
		}
		p.Expire(ctx, q, time.Hour)
		p.Expire(ctx, w, time.Hour)
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// Read on a client of its own, which counts the bytes it sends.
	var sent atomic.Int64
	opt := redistest.Options(b)
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return countingConn{c, &sent}, err
	}
	reader := redis.NewClient(opt)
	defer reader.Close()
	b.Run("inspect", func(b *testing.B) {
		defer redistest.ServerCPU(b, rdb)()
		sent.Store(0)
		for b.Loop() {
			t, err := Read(ctx, reader, prefix, 0)
			if err != nil || len(t.Locks) != 1000 {
				b.Fatalf("%d locks, %v", len(t.Locks), err)
			}
			if n := len(t.Locks[999].Waiters); n != 3 {
				b.Fatalf("%d waiters, want 3", n)
			}
		}
		b.ReportMetric(float64(sent.Load())/float64(b.N), "sent-B/op")
	})
}

// countingConn adds the bytes written on a connection to n.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.n.Add(int64(n))
	return n, err
}
