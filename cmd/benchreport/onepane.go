package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/source"
	"github.com/locktop/locktop/internal/source/leasesource"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/source/redislocks"
	"github.com/locktop/locktop/internal/source/redissource"
	"github.com/locktop/locktop/internal/testenv/redisserver"
	"github.com/locktop/locktop/lockcore/lease"
	"github.com/locktop/locktop/lockcore/redislock"
	"github.com/locktop/locktop/model"
)

// onePane measures issue 13's refresh: every source of the one pane on one
// load (1,000 advisory locks held and 100 SELECT … FOR UPDATE waiters on
// PostgreSQL, 1,000 session mutexes on a throw-away Redis, 1,000 lease
// rows), each source's poll beside its bare read in alternating rounds:
//   - PostgreSQL: the source as the dashboard opens it (pgsource.Connect, a
//     Monitor: its Poll) against pgbench sending the source's own statement
//     (pg-inspect.sql, generated from internal/source/pglocks.SQL and checked
//     by its test): the bare read of the facts the pane shows, advisory
//     locks and row-lock waits with their sessions and relations. Budget:
//     1.3×, for every source. The bare pg_locks query (pg_locks_poll.sql,
//     the advisory rows and their sessions only) is reported beside it, as
//     the Monitor poll figures are, but reads fewer facts than the pane
//     shows, so the budget is not judged against it.
//   - Redis: the Redis source's poll against its bare read
//     (redislocks.BareRead: the commands the source sends, SCAN and a
//     pipeline per page of the next SCAN, TIME and an HMGET per hold, sent
//     from go-redis, replies decoded and dropped), the Redis twin of
//     pgbench sending the source's own statement. A bare go-redis SCAN loop
//     over the prefix (the listing alone) is reported beside it with issue
//     26's budget for it, ≤ 2× with every field read.
//   - Leases: the lease source's poll against pgbench sending the same five
//     statements in one pipeline, as the source does (lease-list.sql,
//     generated from internal/leasedb's statements and checked by its test).
//   - The whole refresh: the three polls at once (source.PollAll, as the
//     dashboard refreshes), against the three bare reads one after another.
//
// The polls are timed in this process over the run's benchtime each.
func onePane(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	l, err := loadOnePane(ctx, r)
	if err != nil {
		return nil, err
	}
	defer l.close()

	mon, err := pgsource.Connect(ctx, r.dsn, pgsource.Options{})
	if err != nil {
		return nil, err
	}
	defer mon.Close()
	pg := source.Named("postgres", mon.Poll)
	rs := redissource.New(redis.NewClient(&redis.Options{Network: "unix", Addr: l.redis.Socket()}), redissource.Options{})
	defer rs.Close()
	leasePool, err := pgxpool.New(ctx, r.dsn)
	if err != nil {
		return nil, err
	}
	defer leasePool.Close()
	ls := leasesource.Postgres("lease", leasePool, "", false)
	// Each source has a connection of its own, so PollAll's concurrent polls
	// never queue behind one another on the client.
	monAll, err := pgsource.Connect(ctx, r.dsn, pgsource.Options{})
	if err != nil {
		return nil, err
	}
	defer monAll.Close()
	all := []source.Source{source.Named("postgres", monAll.Poll), rs, ls}
	// Check the load is what the figure says before timing it.
	for _, c := range []struct {
		src        source.Source
		held, wait int
	}{{pg, 1000, 100}, {rs, 1000, 0}, {ls, 1000, 0}} {
		snap, err := c.src.Poll(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.src.Name(), err)
		}
		if held, waiting := snap.Counts(); held < c.held || waiting < c.wait {
			return nil, fmt.Errorf("%s shows %d held and %d waiting, want at least %d and %d", c.src.Name(), held, waiting, c.held, c.wait)
		}
	}

	scanRDB := redis.NewClient(&redis.Options{Network: "unix", Addr: l.redis.Socket()})
	defer scanRDB.Close()
	bareScan := func(ctx context.Context) (model.Snapshot, error) {
		var cursor uint64
		for {
			_, next, err := scanRDB.Scan(ctx, cursor, redislock.DefaultPrefix+"*", 1000).Result()
			if err != nil || next == 0 {
				return model.Snapshot{}, err
			}
			cursor = next
		}
	}
	bareRead := func(ctx context.Context) (model.Snapshot, error) {
		n, err := redislocks.BareRead(ctx, scanRDB, redislock.DefaultPrefix)
		if err == nil && n < 1000 {
			err = fmt.Errorf("the bare read read %d holds, want 1000", n)
		}
		return model.Snapshot{}, err
	}
	poll := func(name string, p func(context.Context) (model.Snapshot, error)) (float64, error) {
		ns, err := r.timeLoop(ctx, p)
		fmt.Fprintf(r.log, "   %s: %.3f ms\n", name, ns/1e6)
		return ns, err
	}
	var pgNS, pgBare, pgOwn, redisNS, redisBare, redisScan, leaseNS, leaseBare, allNS []float64
	var pgRatio, pgOwnRatio, redisRatio, redisScanRatio, leaseRatio, allRatio []float64
	var pgCmd, pgOwnCmd, leaseCmd string
	for range r.rounds {
		a, err := poll("postgres source", pg.Poll)
		if err != nil {
			return nil, err
		}
		_, b, c, err := r.pgbench(ctx, "-M", "prepared", "-f", benchFile("pg_locks_poll.sql"), "-c", "1")
		if err != nil {
			return nil, err
		}
		pgCmd = c
		pgNS, pgBare, pgRatio = append(pgNS, a), append(pgBare, b*1e6), append(pgRatio, a/(b*1e6))
		_, b, c, err = r.pgbench(ctx, "-M", "prepared", "-f", benchFile("pg-inspect.sql"), "-c", "1")
		if err != nil {
			return nil, err
		}
		pgOwnCmd = c
		pgOwn, pgOwnRatio = append(pgOwn, b*1e6), append(pgOwnRatio, a/(b*1e6))

		a, err = poll("redis source", rs.Poll)
		if err != nil {
			return nil, err
		}
		b, err = poll("redis bare read", bareRead)
		if err != nil {
			return nil, err
		}
		c2, err := poll("bare SCAN loop", bareScan)
		if err != nil {
			return nil, err
		}
		redisNS, redisBare, redisRatio = append(redisNS, a), append(redisBare, b), append(redisRatio, a/b)
		redisScan, redisScanRatio = append(redisScan, c2), append(redisScanRatio, a/c2)

		a, err = poll("lease source", ls.Poll)
		if err != nil {
			return nil, err
		}
		_, b, c, err = r.pgbench(ctx, "-M", "prepared", "-f", benchFile("lease-list.sql"), "-c", "1")
		if err != nil {
			return nil, err
		}
		leaseCmd = c
		leaseNS, leaseBare, leaseRatio = append(leaseNS, a), append(leaseBare, b*1e6), append(leaseRatio, a/(b*1e6))

		a, err = poll("all three sources", func(ctx context.Context) (model.Snapshot, error) {
			for _, p := range source.PollAll(ctx, all) {
				if p.Err != nil {
					return model.Snapshot{}, fmt.Errorf("%s: %w", p.Name, p.Err)
				}
			}
			return model.Snapshot{}, nil
		})
		if err != nil {
			return nil, err
		}
		sum := pgOwn[len(pgOwn)-1] + redisBare[len(redisBare)-1] + leaseBare[len(leaseBare)-1]
		allNS, allRatio = append(allNS, a), append(allRatio, a/sum)
	}
	ms := func(v []float64) string { return fmt.Sprintf("%.2f ms", median(v)/1e6) }
	ratio := func(v []float64) string { return fmt.Sprintf("%.2f× the time", median(v)) }
	load := "1,000 advisory locks + 100 row-lock waits + 1,000 Redis session keys + 1,000 leases"
	goCmd := "go run ./cmd/benchreport -only 'one pane'"
	return []figure{
		{
			Name: "One pane, PostgreSQL source (pgsource.Monitor.Poll), " + load, Figure: ms(pgNS),
			Baseline: ms(pgOwn) + " (pgbench, the source's own statement)", Ratio: ratio(pgOwnRatio), Spread: spread(pgOwnRatio),
			Budget: "≤ 1.3×", Verdict: verdict(median(pgOwnRatio) <= 1.3), Command: goCmd, Baseline2: pgOwnCmd,
		},
		{
			Name: "One pane, PostgreSQL source beside the bare pg_locks query (the advisory rows and their sessions only), same load", Figure: ms(pgNS),
			Baseline: ms(pgBare) + " (bare pg_locks query)", Ratio: ratio(pgRatio), Spread: spread(pgRatio),
			Budget: "—", Verdict: "—", Command: goCmd, Baseline2: pgCmd,
		},
		{
			Name: "One pane, Redis source (SCAN + one pipeline), same load", Figure: ms(redisNS),
			Baseline: ms(redisBare) + " (the source's own commands sent bare from go-redis)", Ratio: ratio(redisRatio), Spread: spread(redisRatio),
			Budget: "≤ 1.3×", Verdict: verdict(median(redisRatio) <= 1.3), Command: goCmd,
			Baseline2: "redislocks.BareRead: SCAN 0 MATCH *" + redislock.DefaultPrefix + "* COUNT 1000, then per page one pipeline of the next SCAN, TIME and HMGET key p f o s e per hold, from go-redis",
		},
		{
			Name: "One pane, Redis source beside a bare SCAN loop (the listing alone), same load", Figure: ms(redisNS),
			Baseline: ms(redisScan) + " (bare go-redis SCAN loop, COUNT 1000)", Ratio: ratio(redisScanRatio), Spread: spread(redisScanRatio),
			Budget: "≤ 2× (issue 26)", Verdict: verdict(median(redisScanRatio) <= 2), Command: goCmd,
			Baseline2: "SCAN 0 MATCH " + redislock.DefaultPrefix + "* COUNT 1000 until the cursor is 0, from go-redis",
		},
		{
			Name: "One pane, lease source (one batch of five statements), same load", Figure: ms(leaseNS),
			Baseline: ms(leaseBare) + " (pgbench, the same five statements pipelined)", Ratio: ratio(leaseRatio), Spread: spread(leaseRatio),
			Budget: "≤ 1.3×", Verdict: verdict(median(leaseRatio) <= 1.3), Command: goCmd, Baseline2: leaseCmd,
		},
		{
			Name: "One pane, the whole refresh (the three polls at once, source.PollAll)", Figure: ms(allNS),
			Baseline: fmt.Sprintf("%.2f ms (the three bare reads, one after another)", (median(pgOwn)+median(redisBare)+median(leaseBare))/1e6),
			Ratio:    ratio(allRatio), Spread: spread(allRatio), Budget: "—", Verdict: "—", Command: goCmd, Baseline2: pgOwnCmd + "` + redislocks.BareRead + `" + leaseCmd,
		},
	}, nil
}

// timeLoop runs poll back to back for the run's benchtime and returns the
// mean time of one, in ns.
func (r *runner) timeLoop(ctx context.Context, poll func(context.Context) (model.Snapshot, error)) (float64, error) {
	d := time.Duration(r.benchSeconds() * float64(time.Second))
	start := time.Now()
	n := 0
	for n == 0 || time.Since(start) < d {
		if _, err := poll(ctx); err != nil {
			return 0, err
		}
		n++
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

// onePaneLoad is the load the one-pane figures are taken on.
type onePaneLoad struct {
	holder *pgx.Conn
	tx     pgx.Tx
	pool   *pgxpool.Pool
	cancel context.CancelFunc
	wg     sync.WaitGroup
	redis  *redisserver.Server
	rdb    *redis.Client
	dsn    string
}

// loadOnePane holds 1,000 advisory locks and 100 rows FOR UPDATE on one
// connection with 100 waiters queued behind the rows, 1,000 Redis session
// mutexes (10-minute TTL) on a throw-away Redis, and 1,000 lease rows
// (written straight into the lease table: the listing reads rows, not
// heartbeats).
func loadOnePane(ctx context.Context, r *runner) (_ *onePaneLoad, err error) {
	l := &onePaneLoad{dsn: r.dsn}
	defer func() {
		if err != nil {
			l.close()
		}
	}()
	if l.holder, err = pgx.Connect(ctx, r.dsn); err != nil {
		return l, err
	}
	if _, err = l.holder.Exec(ctx, `SELECT pg_advisory_lock(79, g) FROM generate_series(1, 1000) g;
		CREATE TABLE IF NOT EXISTS onepane_rows (id int PRIMARY KEY);
		INSERT INTO onepane_rows SELECT g FROM generate_series(1, 100) g ON CONFLICT DO NOTHING`); err != nil {
		return l, err
	}
	if l.tx, err = l.holder.Begin(ctx); err != nil {
		return l, err
	}
	if _, err = l.tx.Exec(ctx, "SELECT * FROM onepane_rows FOR UPDATE"); err != nil {
		return l, err
	}
	cfg, err := pgxpool.ParseConfig(r.dsn)
	if err != nil {
		return l, err
	}
	cfg.MaxConns = 100
	if l.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return l, err
	}
	// The lease tables first: the waiters take every pool connection.
	m, err := lease.OpenPostgres(ctx, l.pool, lease.Options{})
	if err == nil {
		err = m.Close()
	}
	if err != nil {
		return l, err
	}
	if _, err = l.pool.Exec(ctx, `INSERT INTO `+lease.DefaultSchema+`.dal_locks
		(token, lock_id, fence, mode, owner, lease_expires, heartbeat_ts, granted_at, grace_ms)
		SELECT 'onepane-' || g, 'onepane-' || g, 1, 'write', 'onepane', now() + interval '1 hour', now(), now(), 0
		FROM generate_series(1, 1000) g ON CONFLICT DO NOTHING`); err != nil {
		return l, err
	}

	wctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for i := 1; i <= 100; i++ {
		l.wg.Go(func() { _, _ = l.pool.Exec(wctx, "SELECT * FROM onepane_rows WHERE id = $1 FOR UPDATE", i) })
	}

	fmt.Fprintln(r.log, "starting a throw-away Redis...")
	if l.redis, err = redisserver.Start(ctx, redisserver.Options{}); err != nil {
		return l, err
	}
	l.rdb = redis.NewClient(&redis.Options{Network: "unix", Addr: l.redis.Socket()})
	locker := redislock.New(l.rdb, redislock.Options{TTL: 10 * time.Minute, Owner: "onepane"})
	for i := range 1000 {
		if _, err = locker.TryAcquire(ctx, "onepane:"+strconv.Itoa(i)); err != nil {
			return l, fmt.Errorf("redis lock %d: %w", i, err)
		}
	}

	// The waiters queue in their own time: wait until all 100 do.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		if err = l.holder.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'").Scan(&n); err != nil {
			return l, err
		}
		if n >= 100 {
			return l, nil
		}
		if time.Now().After(deadline) {
			return l, fmt.Errorf("only %d of the 100 row waiters queued", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// close lets the load go: the waiters, the locks, the rows it wrote.
func (l *onePaneLoad) close() {
	ctx := context.Background()
	if l.cancel != nil {
		l.cancel()
		l.wg.Wait()
	}
	if l.tx != nil {
		_ = l.tx.Rollback(ctx)
	}
	if l.holder != nil {
		_, _ = l.holder.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		_, _ = l.holder.Exec(ctx, "DROP TABLE IF EXISTS onepane_rows")
		_, _ = l.holder.Exec(ctx, "DELETE FROM "+lease.DefaultSchema+".dal_locks WHERE owner = 'onepane'")
		_ = l.holder.Close(ctx)
	}
	if l.pool != nil {
		l.pool.Close()
	}
	if l.rdb != nil {
		_ = l.rdb.Close()
	}
	if l.redis != nil {
		_ = l.redis.Stop()
	}
}
