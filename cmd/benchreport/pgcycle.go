package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL figures: the lock cycle, the contended hand-over and the
// monitor's poll, each beside pgbench or the bare query.

// lockCycle: one acquire + release from one client, against pgbench sending
// the same two statements over one connection (lock-cycle.sql), and a pinned
// reference: a bare pgx loop of those two statements (BenchmarkBareCycle),
// which no library on pgx can beat, so that a machine slower today shows as
// slower in all three, not as a regression of one. What lockcore adds over
// the bare loop is taken with the two in turn in one loop
// (BenchmarkCycleInterleaved), which a load that moves between two runs
// cannot tilt. Budget: ratio of times
// <= 1.0. pgbench runs -M prepared because lockcore sends its statements as
// pgx does by default: the extended protocol with statements prepared once
// per connection (QueryExecModeCacheStatement). The clients' own CPU per
// cycle, from the same runs, says where a miss comes from.
func lockCycle(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var goNS, pgNS, refNS, ratios, refRatios, libRatios, pairLib, pairBare []float64
	var cpu clientCPU
	var gocmd, pgcmd, refcmd, paircmd string
	for range r.rounds {
		ref, err := r.goBenchRun(ctx, "lockcore", "^BenchmarkBareCycle$")
		if err != nil {
			return nil, err
		}
		lib, err := r.goBenchRun(ctx, "lockcore", "^BenchmarkWithUncontended$")
		if err != nil {
			return nil, err
		}
		pb, err := r.pgbenchRun(ctx, "-M", "prepared", "-f", benchFile("lock-cycle.sql"), "-c", "1")
		if err != nil {
			return nil, err
		}
		pair, err := r.goBenchRun(ctx, "lockcore", "^BenchmarkCycleInterleaved$")
		if err != nil {
			return nil, err
		}
		gocmd, pgcmd, refcmd, paircmd = lib.cmd, pb.cmd, ref.cmd, pair.cmd
		ns, pg := lib.ns, 1e9/pb.tps
		goNS, pgNS, refNS = append(goNS, ns), append(pgNS, pg), append(refNS, ref.ns)
		ratios, refRatios = append(ratios, ns/pg), append(refRatios, ref.ns/pg)
		libRatios, pairLib, pairBare = append(libRatios, pair.metrics["lib/bare"]), append(pairLib, pair.metrics["lib-ns/cycle"]), append(pairBare, pair.metrics["bare-ns/cycle"])
		cpu.add(lib, ref, pb.cpuPerTxn, pb.vcswPerTxn)
	}
	ratio := median(ratios)
	us := func(v []float64, unit string) string { return fmt.Sprintf("%.1f µs/%s", median(v)/1e3, unit) }
	return []figure{
		{
			Name: "Lock cycle, uncontended (acquire + release)", Figure: us(goNS, "op"),
			Baseline: us(pgNS, "txn") + " (pgbench -M prepared)", Ratio: fmt.Sprintf("%.2f× the time", ratio), Spread: spread(ratios),
			Budget: "≤ 1.0×", Verdict: verdict(ratio <= 1.0), Command: gocmd, Baseline2: pgcmd,
		},
		{
			Name: "  pinned reference: a bare pgx loop of the same two statements, one connection", Figure: us(refNS, "op"),
			Baseline: us(pgNS, "txn") + " (pgbench -M prepared)", Ratio: fmt.Sprintf("%.2f× the time", median(refRatios)), Spread: spread(refRatios),
			Budget: "—", Verdict: "—", Command: refcmd, Baseline2: pgcmd,
		},
		{
			Name: "  lockcore against the pinned reference (what the library adds: fence, watch, bookkeeping)", Figure: us(pairLib, "op"),
			Baseline: us(pairBare, "op") + " (bare pgx, the two in turn in one loop)", Ratio: fmt.Sprintf("%.2f× the time", median(libRatios)), Spread: spread(libRatios),
			Budget: "—", Verdict: "—", Command: paircmd, Baseline2: paircmd,
		},
		cpu.figure("  lockcore's client CPU per cycle beside pgbench's (user + system, every thread), and voluntary context switches", "lockcore", "pgbench", gocmd, pgcmd),
	}, nil
}

// contended: 8 goroutines on one key, against 8 pgbench clients on one key
// (contended.sql, -M prepared as above). Three figures in the same rounds:
// every grant through the server, as pgbench's are (the default; budget at
// least 0.9x pgbench's rate); the pinned reference, a bare pgx loop of the
// same two statements on 8 connections (BenchmarkBareContended8), what
// any client on pgx reaches here; and with the in-process hand-off on
// (lockcore.HandOff; budget at least 3x pgbench's rate). With the eight
// backends and the client on two cores, the client's CPU per hand-over
// decides the rate: it is reported beside pgbench's.
func contended(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var srvRate, refRate, hoRate, pgRate, srvRatios, refRatios, libRatios, hoRatios []float64
	var cpu clientCPU
	var srvcmd, refcmd, hocmd, pgcmd string
	for range r.rounds {
		lib, err := r.goBenchRun(ctx, "lockcore", "^BenchmarkWithContended8$")
		if err != nil {
			return nil, err
		}
		pb, err := r.pgbenchRun(ctx, "-M", "prepared", "-f", benchFile("contended.sql"), "-c", "8", "-j", "2")
		if err != nil {
			return nil, err
		}
		ref, err := r.goBenchRun(ctx, "lockcore", "^BenchmarkBareContended8$")
		if err != nil {
			return nil, err
		}
		hns, hc, err := r.goBench(ctx, "lockcore", "^BenchmarkWithContended8HandOff$")
		if err != nil {
			return nil, err
		}
		srvcmd, refcmd, hocmd, pgcmd = lib.cmd, ref.cmd, hc, pb.cmd
		tps := pb.tps
		srvRate, refRate, hoRate, pgRate = append(srvRate, 1e9/lib.ns), append(refRate, 1e9/ref.ns), append(hoRate, 1e9/hns), append(pgRate, tps)
		srvRatios, refRatios, hoRatios = append(srvRatios, (1e9/lib.ns)/tps), append(refRatios, (1e9/ref.ns)/tps), append(hoRatios, (1e9/hns)/tps)
		libRatios = append(libRatios, ref.ns/lib.ns)
		cpu.add(lib, ref, pb.cpuPerTxn, pb.vcswPerTxn)
	}
	srv, ho := median(srvRatios), median(hoRatios)
	base := fmt.Sprintf("%.0f tps (pgbench -M prepared, 8 clients)", median(pgRate))
	return []figure{
		{
			Name: "Contended hand-over through the server, 8 goroutines on one key", Figure: fmt.Sprintf("%.0f ops/s", median(srvRate)),
			Baseline: base, Ratio: fmt.Sprintf("%.2f× the rate", srv), Spread: spread(srvRatios),
			Budget: "≥ 0.9×", Verdict: verdict(srv >= 0.9), Command: srvcmd, Baseline2: pgcmd,
		},
		{
			Name: "  pinned reference: a bare pgx loop of the same two statements, 8 goroutines with a connection each", Figure: fmt.Sprintf("%.0f ops/s", median(refRate)),
			Baseline: base, Ratio: fmt.Sprintf("%.2f× the rate", median(refRatios)), Spread: spread(refRatios),
			Budget: "—", Verdict: "—", Command: refcmd, Baseline2: pgcmd,
		},
		{
			Name: "  lockcore against the hand-over's pinned reference (what the library adds: fence, watch, bookkeeping)", Figure: fmt.Sprintf("%.0f ops/s", median(srvRate)),
			Baseline: fmt.Sprintf("%.0f ops/s (bare pgx)", median(refRate)), Ratio: fmt.Sprintf("%.2f× the rate", median(libRatios)), Spread: spread(libRatios),
			Budget: "—", Verdict: "—", Command: srvcmd, Baseline2: refcmd,
		},
		cpu.figure("  lockcore's client CPU per hand-over beside pgbench's (user + system, every thread), and voluntary context switches", "lockcore", "pgbench", srvcmd, pgcmd),
		{
			Name: "In-process hand-off, 8 goroutines of one Service on one key (lockcore.HandOff)", Figure: fmt.Sprintf("%.0f ops/s", median(hoRate)),
			Baseline: base, Ratio: fmt.Sprintf("%.2f× the rate", ho), Spread: spread(hoRatios),
			Budget: "≥ 3×", Verdict: verdict(ho >= 3), Command: hocmd, Baseline2: pgcmd,
		},
	}, nil
}

// inspect: monitor.Inspect with N advisory locks held, against pgbench
// running the bare pg_locks query (pg_locks_poll.sql) with the same N held.
// Budget: within 1.3x at 1,000 locks; the 10,000 figure feeds the
// poll + decode + render budget.
func inspect(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var figs []figure
	for _, n := range []int{100, 1_000, 10_000} {
		var goNS, pgMS, ratios []float64
		var gocmd, pgcmd string
		for range r.rounds {
			ns, c, err := r.goBench(ctx, "internal/source/pgsource", fmt.Sprintf("^BenchmarkInspect$/^locks=%d$", n))
			if err != nil {
				return nil, err
			}
			ms, pc, err := r.barePoll(ctx, n)
			if err != nil {
				return nil, err
			}
			gocmd, pgcmd = c, pc
			goNS, pgMS = append(goNS, ns), append(pgMS, ms)
			ratios = append(ratios, ns/(ms*1e6))
		}
		ratio := median(ratios)
		f := figure{
			Name: fmt.Sprintf("Monitor poll (Inspect), %d held locks", n), Figure: fmt.Sprintf("%.2f ms", median(goNS)/1e6),
			Baseline: fmt.Sprintf("%.2f ms", median(pgMS)), Ratio: fmt.Sprintf("%.2f× the time", ratio), Spread: spread(ratios),
			Budget: "—", Verdict: "—", Command: gocmd, Baseline2: pgcmd, Held: n,
		}
		if n == 1_000 {
			f.Budget, f.Verdict = "≤ 1.3×", verdict(ratio <= 1.3)
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// barePoll holds n locks on a connection of its own while pgbench runs the
// bare monitor query, and returns pgbench's average latency in ms.
func (r *runner) barePoll(ctx context.Context, n int) (float64, string, error) {
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(77, g) FROM generate_series(1, $1) g", n); err != nil {
		return 0, "", err
	}
	_, ms, cmdline, err := r.pgbench(ctx, "-f", benchFile("pg_locks_poll.sql"), "-c", "1")
	return ms, cmdline, err
}
