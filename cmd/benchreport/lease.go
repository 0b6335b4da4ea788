package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/lockcore/lease"
)

// leaseLocks measures lockcore/lease (seed 004's lease locks): one lock
// cycle (acquire + release, uncontended) on PostgreSQL against pgbench
// sending the same statements (lease-cycle.sql, budget 1.2×), and on
// SQLite against the same statements sent bare through database/sql; and
// the pinned reference, a bare pgx loop of the cycle's statements (what
// pgx and the Go runtime cost beside pgbench, and what the library adds);
// the hand-over of one write lock between eight goroutines, against
// cirello.io/pglock (budget: 10× faster) and against the physical limit, a
// release and an acquire back to back (the cycle's own baseline).
func leaseLocks(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	const pkg = "lockcore/lease"
	bin := filepath.Join(r.bin, testBinary(pkg))
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return nil, err
	}
	if err := r.cmd(ctx, "go", "test", "-c", "-o", bin, "./"+pkg).Run(); err != nil {
		return nil, fmt.Errorf("building %s benchmarks: %w", pkg, err)
	}
	// pgbench's database needs the lease tables (a Manager creates them)
	// and, like the Go benchmark's, its 10,000 resources made already.
	pool, err := pgxpool.New(ctx, r.dsn)
	if err != nil {
		return nil, err
	}
	m, err := lease.OpenPostgres(ctx, pool, lease.Options{})
	if err == nil {
		err = m.Close()
	}
	if err == nil {
		_, err = pool.Exec(ctx, `INSERT INTO `+lease.DefaultSchema+`.dal_resources (lock_id)
			SELECT g::text FROM generate_series(1, 10000) g ON CONFLICT DO NOTHING`)
	}
	pool.Close()
	if err != nil {
		return nil, err
	}

	var cycle, pgCycle, cycleRatio, hand, pglock, handRatio, handLimit []float64
	var pinned, pinnedRatio, overPinned []float64
	var lite, bare, liteRatio, liteHand, liteHandRatio []float64
	var cmds [8]string
	var cpu clientCPU
	for range r.rounds {
		lib, err := r.goBenchRun(ctx, pkg, "^BenchmarkCyclePostgres$")
		if err != nil {
			return nil, err
		}
		pb, err := r.pgbenchRun(ctx, "-M", "prepared", "-f", benchFile("lease-cycle.sql"), "-c", "1",
			"-D", "mode=write", "-D", "owner=bench", "-D", "chan="+lease.DefaultSchema,
			"-D", "conflicting={read,write,upgradeable}", "-D", "precedence=false")
		if err != nil {
			return nil, err
		}
		ref, err := r.goBenchRun(ctx, pkg, "^BenchmarkCyclePostgresBare$")
		if err != nil {
			return nil, err
		}
		ns, c0, tps, c1, pn0, c7 := lib.ns, lib.cmd, pb.tps, pb.cmd, ref.ns, ref.cmd
		cpu.add(lib, ref, pb.cpuPerTxn, pb.vcswPerTxn)
		hn, c2, err := r.goBench(ctx, pkg, "^BenchmarkHandoverPostgres$")
		if err != nil {
			return nil, err
		}
		pn, c3, err := r.goBench(ctx, pkg, "^BenchmarkHandoverPglock$")
		if err != nil {
			return nil, err
		}
		ln, c4, err := r.goBench(ctx, pkg, "^BenchmarkCycleSQLite$")
		if err != nil {
			return nil, err
		}
		bn, c5, err := r.goBench(ctx, pkg, "^BenchmarkCycleSQLiteBare$")
		if err != nil {
			return nil, err
		}
		lh, c6, err := r.goBench(ctx, pkg, "^BenchmarkHandoverSQLite$")
		if err != nil {
			return nil, err
		}
		cmds = [8]string{c0, c1, c2, c3, c4, c5, c6, c7}
		limit := 1e9 / tps
		cycle, pgCycle, cycleRatio = append(cycle, ns), append(pgCycle, limit), append(cycleRatio, ns/limit)
		pinned, pinnedRatio, overPinned = append(pinned, pn0), append(pinnedRatio, pn0/limit), append(overPinned, ns/pn0)
		hand, pglock, handRatio, handLimit = append(hand, hn), append(pglock, pn), append(handRatio, pn/hn), append(handLimit, hn/limit)
		lite, bare, liteRatio = append(lite, ln), append(bare, bn), append(liteRatio, ln/bn)
		liteHand, liteHandRatio = append(liteHand, lh), append(liteHandRatio, lh/bn)
	}
	ms := func(v []float64) string { return fmt.Sprintf("%.2f ms", median(v)/1e6) }
	return []figure{
		{
			Name: "Lease lock cycle on PostgreSQL, uncontended (acquire + release)", Figure: ms(cycle),
			Baseline: ms(pgCycle) + " (pgbench, same statements)", Ratio: fmt.Sprintf("%.2f× the time", median(cycleRatio)), Spread: spread(cycleRatio),
			Budget: "≤ 1.2×", Verdict: verdict(median(cycleRatio) <= 1.2), Command: cmds[0], Baseline2: cmds[1],
		},
		{
			Name: "  pinned reference: a bare pgx loop of the same statements, one pool", Figure: ms(pinned),
			Baseline: ms(pgCycle) + " (pgbench, same statements)", Ratio: fmt.Sprintf("%.2f× the time", median(pinnedRatio)), Spread: spread(pinnedRatio),
			Budget: "—", Verdict: "—", Command: cmds[7], Baseline2: cmds[1],
		},
		{
			Name: "  lease against the pinned reference (what the library adds: tokens, order check, context, heartbeat, loss watch)", Figure: ms(cycle),
			Baseline: ms(pinned) + " (bare pgx)", Ratio: fmt.Sprintf("%.2f× the time", median(overPinned)), Spread: spread(overPinned),
			Budget: "—", Verdict: "—", Command: cmds[0], Baseline2: cmds[7],
		},
		cpu.figure("  lease's client CPU per cycle beside pgbench's (user + system, every thread), and voluntary context switches", "lease", "pgbench", cmds[0], cmds[1]),
		{
			Name: "Lease hand-over on PostgreSQL, 8 goroutines, one write lock, each grant to a waiting goroutine", Figure: ms(hand) + " per hand-over",
			Baseline: ms(pglock) + " (cirello.io/pglock, 1 s lease)", Ratio: fmt.Sprintf("%.0f× faster", median(handRatio)), Spread: spread(handRatio),
			Budget: "≥ 10× faster", Verdict: verdict(median(handRatio) >= 10), Command: cmds[2], Baseline2: cmds[3],
		},
		{
			Name: "  the same against the physical limit (a release and an acquire back to back)", Figure: ms(hand),
			Baseline: ms(pgCycle) + " (pgbench cycle)", Ratio: fmt.Sprintf("%.2f× the time", median(handLimit)), Spread: spread(handLimit),
			Budget: "—", Verdict: "—", Command: cmds[2], Baseline2: cmds[1],
		},
		{
			Name: "Lease lock cycle on SQLite, uncontended (acquire + release)", Figure: ms(lite),
			Baseline: ms(bare) + " (same statements, bare)", Ratio: fmt.Sprintf("%.2f× the time", median(liteRatio)), Spread: spread(liteRatio),
			Budget: "≤ 1.2×", Verdict: verdict(median(liteRatio) <= 1.2), Command: cmds[4], Baseline2: cmds[5],
		},
		{
			Name: "Lease hand-over on SQLite, 8 goroutines, one write lock, each grant to a waiting goroutine", Figure: ms(liteHand) + " per hand-over",
			Baseline: ms(bare) + " (bare cycle: the physical limit)", Ratio: fmt.Sprintf("%.2f× the time", median(liteHandRatio)), Spread: spread(liteHandRatio),
			Budget: "—", Verdict: "—", Command: cmds[6], Baseline2: cmds[5],
		},
	}, nil
}
