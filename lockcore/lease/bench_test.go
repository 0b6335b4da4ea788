package lease

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"cirello.io/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/locktop/locktop/internal/testenv/benchcpu"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// The benchmarks of `make bench` (cmd/benchreport/lease.go): one lock
// cycle (acquire + release, uncontended) and the hand-over of one write
// lock between eight goroutines, on each store, beside their baselines:
// pgbench running the same statements (testdata/bench/lease-cycle.sql),
// the same statements sent bare to SQLite, and cirello.io/pglock.

// benchManager opens a Manager on the default schema of the test database
// (the one pgbench's script names) with the default options.
func benchManager(b *testing.B, store string) *Manager {
	b.Helper()
	ctx := context.Background()
	var m *Manager
	var err error
	if store == "postgres" {
		pool := pgtest.Pool(b, func(c *pgxpool.Config) { c.MaxConns = 16 })
		m, err = OpenPostgres(ctx, pool, Options{})
	} else {
		m, err = OpenSQLite(ctx, filepath.Join(b.TempDir(), "bench.db"), Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	// The resources exist already, as they do for pgbench after its first
	// round: a cycle measures a lock, not the first use of a resource.
	switch st := m.st.(type) {
	case *pgStore:
		_, err = st.pool.Exec(ctx, inSchema(DefaultSchema, `INSERT INTO {s}.dal_resources (lock_id)
			SELECT 'map:' || g FROM generate_series(1, 10000) g ON CONFLICT DO NOTHING`))
	case *sqliteStore:
		_, err = st.db.ExecContext(ctx, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 10000)
			INSERT OR IGNORE INTO dal_resources (lock_id) SELECT 'map:' || n FROM g`)
	}
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// cycle is one uncontended acquire + release of a random map among 10,000
// (pgbench's script draws the same way).
func cycle(b *testing.B, m *Manager) {
	ctx := context.Background()
	defer benchcpu.PerOp(b)()
	for b.Loop() {
		l, err := m.Acquire(ctx, Map(strconv.Itoa(1+rand.IntN(10_000))), Write)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCyclePostgres(b *testing.B) { cycle(b, benchManager(b, "postgres")) }
func BenchmarkCycleSQLite(b *testing.B)   { cycle(b, benchManager(b, "sqlite")) }

// BenchmarkCyclePostgresBare sends the statements of one uncontended
// acquire and one release, as pgStore sends them (the two pipelined batches
// of lease-cycle.sql), straight through the same pgx pool, with none of the
// Manager's work (tokens, the order check, the lock's context, its
// heartbeat and loss watch): the pinned reference that separates what the
// library adds from what pgx and the Go runtime cost beside pgbench.
func BenchmarkCyclePostgresBare(b *testing.B) {
	ctx := context.Background()
	p := benchManager(b, "postgres").st.(*pgStore)
	conflicting := []string{"read", "write", "upgradeable"}
	lease, grace, ttl := (30 * time.Second).Microseconds(), int64(20_000), (10 * time.Second).Microseconds()
	defer benchcpu.PerOp(b)()
	for b.Loop() {
		lockID, token, wid := "map:"+strconv.Itoa(1+rand.IntN(10_000)), newToken(), newToken()
		acq := &pgx.Batch{}
		acq.Queue(p.q(pgBumpResource), lockID)
		acq.Queue(p.q(pgState), lockID)
		acq.Queue(p.q(pgFastGrant), lockID, token, "write", "bench", lease, grace, conflicting, false, wid)
		acq.Queue(p.q(pgWaitIfRefused), wid, lockID, "write", "bench", ttl, token)
		must(b, p.pool.SendBatch(ctx, acq).Close())
		rel := &pgx.Batch{}
		rel.Queue(p.q(pgShareRow), lockID)
		rel.Queue(p.q(pgRelease), token)
		rel.Queue(p.q(pgWakeIfWait), lockID, p.channel)
		must(b, p.pool.SendBatch(ctx, rel).Close())
	}
}

// BenchmarkCycleSQLiteBare sends the statements of one acquire and one
// release, as the SQLite store sends them, straight through database/sql:
// the physical limit of a cycle on SQLite.
func BenchmarkCycleSQLiteBare(b *testing.B) {
	ctx := context.Background()
	m := benchManager(b, "sqlite") // creates the tables
	db, err := sql.Open("sqlite", sqliteDSN(m.st.(*sqliteStore).path, false))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	lease := 30 * time.Second
	for b.Loop() {
		lockID, token := "map:"+strconv.Itoa(1+rand.IntN(10_000)), newToken()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		var nowText string
		var fence int64
		must(b, tx.QueryRowContext(ctx, sqliteNow).Scan(&nowText))
		now, _ := time.Parse(sqliteTime, nowText)
		_, err = tx.ExecContext(ctx, sqEnsureResource, lockID)
		must(b, err)
		must(b, tx.QueryRowContext(ctx, sqFence, lockID).Scan(&fence))
		for _, q := range []string{sqHolders, sqWaiters} {
			args := []any{lockID}
			if q == sqHolders {
				args = append(args, nowText)
			}
			rows, err := tx.QueryContext(ctx, q, args...)
			must(b, err)
			for rows.Next() {
			}
			must(b, rows.Close())
		}
		must(b, tx.QueryRowContext(ctx, sqBumpFence, lockID).Scan(&fence))
		_, err = tx.ExecContext(ctx, sqGrant, lockID, nowText, token, fence, "write", "bench", fmtTime(now.Add(lease)), int64(20_000))
		must(b, err)
		must(b, tx.Commit())
		tx, err = db.BeginTx(ctx, nil)
		must(b, err)
		_, err = tx.ExecContext(ctx, sqRelease, token)
		must(b, err)
		must(b, tx.Commit())
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// handover runs eight goroutines that take and release one write lock in
// turn; ns/op is the time per hand-over. A goroutine that released waits
// for the next grant before it queues again, so every grant goes to a
// goroutine that was already waiting: a hand-over, not the releaser
// barging back in (which would measure a lock's unfairness, not its
// hand-over).
func handover(b *testing.B, take func(ctx context.Context) (release func() error, err error)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		next   = sync.NewCond(&mu)
		grants int
	)
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				release, err := take(ctx)
				if ctx.Err() != nil { // b.N hand-overs done; this waiter gives up
					if err == nil {
						_ = release()
					}
					return
				}
				if err != nil {
					b.Error(err)
					cancel()
					return
				}
				mu.Lock()
				grants++
				mine := grants
				if grants >= b.N {
					b.StopTimer()
					cancel()
				}
				next.Broadcast()
				mu.Unlock()
				if err := release(); err != nil {
					b.Error(err)
				}
				mu.Lock()
				for grants == mine && ctx.Err() == nil {
					next.Wait()
				}
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

func benchHandover(b *testing.B, store string) {
	m := benchManager(b, store)
	r := Map("handover-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	handover(b, func(ctx context.Context) (func() error, error) {
		l, err := m.Acquire(ctx, r, Write)
		if err != nil {
			return nil, err
		}
		return func() error { return l.Release(context.Background()) }, nil
	})
}

func BenchmarkHandoverPostgres(b *testing.B) { benchHandover(b, "postgres") }
func BenchmarkHandoverSQLite(b *testing.B)   { benchHandover(b, "sqlite") }

// pglockLease is the lease cirello.io/pglock runs with here: 1s (its
// default is 20s), with heartbeats every 250ms. Its waiters sleep a whole
// lease between tries, so its hand-over grows with the lease.
const pglockLease = time.Second

// BenchmarkHandoverPglock is the same hand-over with cirello.io/pglock,
// over pgx's database/sql driver (pglock.UnsafeNew: New insists on lib/pq).
func BenchmarkHandoverPglock(b *testing.B) {
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg.ConnConfig)
	defer db.Close()
	db.SetMaxOpenConns(16)
	c, err := pglock.UnsafeNew(db, pglock.WithCustomTable("pglock_bench"),
		pglock.WithLeaseDuration(pglockLease), pglock.WithHeartbeatFrequency(pglockLease/4))
	if err != nil {
		b.Fatal(err)
	}
	if err := c.TryCreateTable(); err != nil {
		b.Fatal(err)
	}
	name := "handover-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	handover(b, func(ctx context.Context) (func() error, error) {
		l, err := c.AcquireContext(ctx, name)
		if err != nil {
			return nil, err
		}
		return func() error {
			// pglock says "already released" when a retried DELETE finds its
			// first attempt's work done, or the lease passed under load (make
			// bench on a busy machine): the lock is free either way, as
			// pglock's own tests accept. Only its other errors fail the run.
			if err := c.ReleaseContext(context.Background(), l); !errors.Is(err, pglock.ErrLockAlreadyReleased) {
				return err
			}
			return nil
		}, nil
	})
}
