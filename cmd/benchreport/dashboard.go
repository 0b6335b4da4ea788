package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The dashboard's and the simulator's figures: a refresh at 10,000 locks,
// the CPU at rest, the simulator's throughput.

// dashboard: one refresh of the dashboard at 10,000 held locks (and 20
// waiters): the monitor's poll, the snapshot through Update, a full render
// at 160x50. Budget: under 50 ms. The baseline is the bare pg_locks query
// at 10,000 locks, which no poll can beat.
func dashboard(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var goNS, pgMS, ratios, uiNS, queuedNS []float64
	var gocmd, pgcmd, uicmd, qcmd string
	for range r.rounds {
		ns, c, err := r.goBench(ctx, "internal/cli", `^BenchmarkDashboardRefresh10k$/^poll\+update\+render$`)
		if err != nil {
			return nil, err
		}
		ms, pc, err := r.barePoll(ctx, 10_000)
		if err != nil {
			return nil, err
		}
		// The same refresh's update and render alone, on its polled snapshots.
		un, uc, err := r.goBench(ctx, "internal/cli", `^BenchmarkDashboardRefresh10k$/^update\+render$`)
		if err != nil {
			return nil, err
		}
		qn, qc, err := r.goBench(ctx, "ui", "^BenchmarkSnapshot10k$/^plain$")
		if err != nil {
			return nil, err
		}
		gocmd, pgcmd, uicmd, qcmd = c, pc, uc, qc
		goNS, pgMS, uiNS, queuedNS = append(goNS, ns), append(pgMS, ms), append(uiNS, un), append(queuedNS, qn)
		ratios = append(ratios, ns/(ms*1e6))
	}
	total := median(goNS) / 1e6
	return []figure{
		{
			Name: "Dashboard refresh at 10,000 held locks (poll + decode + update + render)", Figure: fmt.Sprintf("%.1f ms", total),
			Baseline: fmt.Sprintf("%.1f ms (bare pg_locks query)", median(pgMS)), Ratio: fmt.Sprintf("%.2f× the time", median(ratios)),
			Spread: spread(ratios), Budget: "< 50 ms", Verdict: verdict(total < 50), Command: gocmd, Baseline2: pgcmd, Held: 10_000,
		},
		{
			Name: "  of which update + render alone (the same 10,000 held and 20 waiting, 160×50, only visible rows drawn)", Figure: fmt.Sprintf("%.2f ms", median(uiNS)/1e6),
			Baseline: "—", Ratio: "—", Budget: "—", Verdict: "—", Command: uicmd,
		},
		{
			Name: "Update + render at 10,000 locks in 2,500 queues (7,500 waiting: 2,500 contention episodes followed)", Figure: fmt.Sprintf("%.2f ms", median(queuedNS)/1e6),
			Baseline: "—", Ratio: "—", Budget: "—", Verdict: "—", Command: qcmd,
		},
	}, nil
}

// idle: the dashboard's CPU at rest: locktop --dsn in a real terminal
// (tmux), refreshing every second with a few locks held and nothing
// changing, for the run's duration. Budget: under 1% of a core.
func idle(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	const settle, measure = 5 * time.Second, 30 * time.Second
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(1, g) FROM generate_series(1, 10) g"); err != nil {
		return nil, err
	}
	sock := fmt.Sprintf("locktop-bench-%d", os.Getpid())
	tmux := func(args ...string) ([]byte, error) {
		return r.cmd(ctx, "tmux", append([]string{"-L", sock}, args...)...).Output()
	}
	cmdline := fmt.Sprintf("exec %s --dsn '%s' --interval 1s --log /dev/null", filepath.Join(r.root, "bin", "locktop"), r.dsn)
	if _, err := tmux("new-session", "-d", "-x", "160", "-y", "50", cmdline); err != nil {
		return nil, fmt.Errorf("tmux: %w", err)
	}
	defer tmux("kill-server")
	out, err := tmux("display-message", "-p", "#{pane_pid}")
	if err != nil {
		return nil, err
	}
	pid := strings.TrimSpace(string(out))
	time.Sleep(settle)
	t0, c0, err := cpuSeconds(pid)
	if err != nil {
		return nil, err
	}
	time.Sleep(measure)
	t1, c1, err := cpuSeconds(pid)
	if err != nil {
		return nil, err
	}
	pct := 100 * (c1 - c0) / t1.Sub(t0).Seconds()
	fmt.Fprintf(r.log, "   dashboard at rest: %.2f%% of a core over %s\n", pct, measure)
	return []figure{{
		Name: "Dashboard at rest (1 s refresh, 10 locks, nothing changing)", Figure: fmt.Sprintf("%.2f%% of a core", pct),
		Baseline: "—", Ratio: "—", Budget: "< 1% of a core", Verdict: verdict(pct < 1),
		Command: "locktop --dsn DSN --interval 1s in tmux at 160×50; CPU time from /proc/PID/task/*/schedstat over 30 s",
	}}, nil
}

// simReport is the part of locktop sim's JSON report this reads.
type simReport struct {
	OK         bool                       `json:"ok"`
	Agents     int                        `json:"agents"`
	Goroutines int                        `json:"goroutines"`
	Duration   float64                    `json:"duration_s"`
	SectionsPS float64                    `json:"sections_per_s"`
	HooksPS    float64                    `json:"hooks_per_s"`
	PeakRSS    int64                      `json:"peak_rss_bytes"`
	WaitMS     struct{ P50, P99 float64 } `json:"wait_ms"`
	Invariants []struct {
		Name       string `json:"name"`
		Violations int64  `json:"violations"`
	} `json:"invariants"`
}

// simulator: the scale scenario (10,000 agents, 1,000 goroutines) on the
// same cluster. Budget: no invariant broken.
func simulator(ctx context.Context, r *runner, dur time.Duration) ([]figure, error) {
	if dur <= 0 {
		return nil, nil
	}
	out := filepath.Join(r.bin, "scale.json")
	args := []string{"sim", "--headless", "--scenario", "scale", "--agents", "10000", "--goroutines", "1000",
		"--duration", dur.String(), "--json", out, "--dsn", r.dsn, "--reset"}
	c := r.cmd(ctx, filepath.Join(r.root, "bin", "locktop"), args...)
	c.Stdout = r.log
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 { // 1: an invariant broke, reported below
			return nil, fmt.Errorf("locktop sim: %w", err)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	var rep simReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("reading %s: %w", out, err)
	}
	var broken int64
	for _, inv := range rep.Invariants {
		broken += inv.Violations
	}
	cmdline := "locktop " + strings.Join(args[:len(args)-5], " ") + " scale.json --dsn DSN --reset"
	return []figure{{
		Name: fmt.Sprintf("Simulator at scale (%d agents, %d goroutines, %.0f s)", rep.Agents, rep.Goroutines, rep.Duration),
		Figure: fmt.Sprintf("%.0f critical sections/s (%.0f hooks/s); lock wait p50 %.0f ms, p99 %.0f ms; peak RSS %.0f MB; %d violations",
			rep.SectionsPS, rep.HooksPS, rep.WaitMS.P50, rep.WaitMS.P99, float64(rep.PeakRSS)/(1<<20), broken),
		Baseline: "—", Ratio: "—", Budget: "no invariant broken", Verdict: verdict(rep.OK && broken == 0), Command: cmdline,
	}}, nil
}

// reading explains the figures; it holds no numbers, so it never goes stale.
const reading = `
## Reading the figures

- **Baselines and their protocol.** lockcore, like pgx by default, sends each statement with
  the extended protocol, prepared once per connection and then bound and executed; so the
  pgbench baselines run with -M prepared, the same protocol for the same statements. -M simple
  (one text Query message) is a different client cost, not the library's, and would make the
  baseline faster or slower for reasons the library does not have. The pgbench scripts send
  the bare pg_advisory_lock and pg_advisory_unlock: the physical limit of a lock cycle, so
  what the library adds (the fence's nextval inside the lock statement, the watch, the
  bookkeeping) counts against it.
- **The pinned reference.** A bare pgx loop of the same two statements on one connection
  (BenchmarkBareCycle) runs in every round of the lock cycle. Nothing built on pgx can beat
  it; if it is slower than in an earlier run, the machine was slower, and every figure with
  it. Its ratio to pgbench says how the two clients compare on the machine today. What the
  library adds over it (the rows "against the pinned reference" of the lock cycle and the Redis
  mutex) is taken with the two in turn in one loop (interleave.Pair), which a load that moves
  between two runs cannot tilt.
- **Lock cycle.** One acquire and one release are one round trip each: lock connections get
  their lock_timeout (and application_name) once per connection, so the acquire is one
  statement, pg_advisory_lock and the fencing token's nextval.
- **Contended hand-over.** On two cores the eight backends and the client share the CPU, so
  the client's CPU per hand-over decides the rate. Go's runtime spends more of it than
  pgbench's single-threaded loop (cross-thread wake-ups in the netpoller). The figure is taken
  at the default GOMAXPROCS, as users run it. Its pinned reference, a bare pgx loop of the
  same two statements on eight connections (BenchmarkBareContended8), is what any client on
  pgx reaches on the machine that day.
- **Client CPU.** The rows "client CPU per cycle" and "per hand-over" give the process's CPU
  (user and system, every thread: getrusage for the Go benchmarks, the child's rusage for
  pgbench) and its voluntary context switches per operation, from the same runs as the times.
  On a virtual machine a context switch costs more than the client's own code; where the
  bare pgx loop already spends a multiple of pgbench's CPU, the budget against pgbench is out
  of reach of any Go client on pgx, and what the library adds is the row against the
  pinned reference.
- **In-process hand-off.** With lockcore.HandOff, a released lock passes to a goroutine of
  the same Service waiting for the key on the session that still holds it: no unlock, no
  lock, no backend woken. Fences for the hand-offs are drawn ahead on that session (one round
  trip for up to 32), and after 32 hand-offs or 10 ms the lock goes back to the server so other
  sessions' waiters get their turn; those server round trips are part of the figure.
- **Loss detection.** A held lock's idle connection is watched (a blocked read, no round
  trip); the delay is what the server takes to send its farewell to each backend, plus a
  wake-up. A restart ends 20 backends at once on two shared cores, which is most of its
  figure.
- **Monitor poll.** One statement per poll, returning each backend's details once rather
  than once per lock, decoded without per-row allocations. It reads more than the bare query
  (database, user, query text, wait start), which is what the remaining ratio at 10,000 locks
  pays for.
- **One pane's PostgreSQL source.** Its budget is judged against pgbench sending the source's
  own statement (pg-inspect.sql, generated from the statement and checked by a test, as the
  lease source's lease-list.sql is): that is the bare read of what the pane shows (advisory
  locks and row-lock waits, with their sessions, the waited-for relations' names and the
  server's counts), so the ratio is what the client adds. The bare pg_locks query reads only
  the advisory rows and their sessions; its row is kept, as a reference of the machine, not
  as the budget's baseline. The source is measured as the dashboard opens it (a Monitor).
- **Dashboard.** Almost all of a 10,000-lock refresh is the poll; the dashboard renders only
  the rows that fit on the screen.
- **Simulator.** The scale scenario fires 1,000 hooks back to back onto its pools (a
  lock pool of 200 and the hook service's original work pool of 25), so its lock waits are mostly queueing for a connection,
  by design; what it must show is that no invariant breaks under that load.
`
