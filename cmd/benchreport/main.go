// Command benchreport measures every performance budget locktop holds
// itself to (each figure's section states it) against its physical limit,
// on one throw-away PostgreSQL cluster in one run, and writes
// BENCHMARKS.md. `make bench` runs it.
//
// These machines are noisy, so each project figure is taken beside its
// baseline in alternating rounds, and the report gives the median of the
// per-round ratios, not bare times.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/pgcluster"
)

// figure is one line of the report.
type figure struct {
	Name      string
	Figure    string // the project's number
	Baseline  string // the physical limit's number
	Ratio     string
	Spread    string // the lowest and highest per-round ratio, when there is one per round
	Budget    string
	Verdict   string // "met", "missed" or "—"
	Command   string // how to reproduce the project's number
	Baseline2 string // how to reproduce the baseline
	Held      int    // advisory locks held while the baseline ran
}

type runner struct {
	env      []string
	dsn      string
	root     string
	bin      string // bin/bench
	rounds   int
	benchFor string // -test.benchtime
	pgbenchT string // pgbench -T seconds
	log      *os.File
}

func main() {
	out := flag.String("out", "BENCHMARKS.md", "report file to write")
	rounds := flag.Int("rounds", 7, "alternating rounds per pairing (medians and the spread of per-round ratios are reported)")
	benchtime := flag.Duration("benchtime", time.Second, "duration of each Go benchmark and pgbench run in a round")
	simDur := flag.Duration("sim-duration", 60*time.Second, "duration of the simulator scale run (0 skips it)")
	flag.Func("only", "run only the steps whose name matches this regular expression (e.g. 'lease')", func(v string) (err error) {
		only, err = regexp.Compile(v)
		return err
	})
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *out, *rounds, *benchtime, *simDur); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, rounds int, benchtime, simDur time.Duration) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	r := &runner{root: root, bin: filepath.Join(root, "bin", "bench"), rounds: max(rounds, 1),
		benchFor: benchtime.String(), pgbenchT: strconv.Itoa(max(int(benchtime.Seconds()), 1)), log: os.Stderr}
	if err := os.MkdirAll(r.bin, 0o755); err != nil {
		return err
	}
	fmt.Fprintln(r.log, "building test binaries...")
	for _, pkg := range benchPackages {
		if err := r.cmd(ctx, "go", "test", "-c", "-o", filepath.Join(r.bin, testBinary(pkg)), "./"+pkg).Run(); err != nil {
			return fmt.Errorf("building %s benchmarks: %w", pkg, err)
		}
	}
	if err := r.cmd(ctx, "go", "build", "-o", filepath.Join(root, "bin", "locktop"), ".").Run(); err != nil {
		return fmt.Errorf("building locktop: %w", err)
	}

	fmt.Fprintln(r.log, "starting a throw-away PostgreSQL...")
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return err
	}
	defer c.Stop()
	r.dsn = c.DSN("postgres")
	r.env = append(os.Environ(), "PGHOST="+c.SocketDir(), "PGPORT=5432", "PGUSER="+pgcluster.Superuser,
		"PGDATABASE=postgres", "LOCKTOP_TEST_DSN="+r.dsn)

	var figs []figure
	for _, step := range steps {
		if only != nil && !only.MatchString(step.name) {
			continue
		}
		fmt.Fprintf(r.log, "== %s\n", step.name)
		fs, err := step.run(ctx, r, simDur)
		if err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
		figs = append(figs, fs...)
	}
	var version string
	if conn, err := pgx.Connect(ctx, r.dsn); err == nil {
		_ = conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&version)
		conn.Close(ctx)
	}
	return os.WriteFile(out, []byte(report(figs, version, r)), 0o644)
}

// benchPackages are the packages whose test binaries hold benchmarks
// (internal/cli has the dashboard's refresh benchmark).
var benchPackages = []string{"lockcore", "internal/source/pgsource", "ui", "internal/cli", "internal/record/recording", "internal/record/history"}

// only, if set (-only), selects the steps to run by name.
var only *regexp.Regexp

// steps are the measurements, in report order.
var steps = []struct {
	name string
	run  func(context.Context, *runner, time.Duration) ([]figure, error)
}{
	{"lock cycle", lockCycle},
	{"contended hand-over", contended},
	{"loss detection", loss},
	{"monitor poll", inspect},
	{"dashboard refresh", dashboard},
	{"dashboard at rest", idle},
	{"simulator at scale", simulator},
	{"simulator at scale: acf and fole", simSystems},
	{"recording size", recordingSize},
	{"history", history},
	{"lease locks", leaseLocks},
	{"Redis session mutex", redisMutex},
	{"one pane", onePane},
	{"at rest beside pg_activity", restBeside},
}

func (r *runner) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = r.root
	c.Env = r.env
	c.Stderr = r.log
	return c
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+)\s+\d+\s+([0-9.]+) ns/op`)

// goBench runs one benchmark of a test binary and returns ns/op.
func (r *runner) goBench(ctx context.Context, pkg, pattern string) (float64, string, error) {
	args := []string{"-test.run", "^$", "-test.bench", pattern, "-test.benchtime", r.benchFor, "-test.count", "1"}
	c := r.cmd(ctx, filepath.Join(r.bin, testBinary(pkg)), args...)
	c.Dir = filepath.Join(r.root, pkg)
	outb, err := c.Output()
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w\n%s", pkg, pattern, err, outb)
	}
	for _, line := range strings.Split(string(outb), "\n") {
		if m := benchLine.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			fmt.Fprintln(r.log, "  ", strings.Join(strings.Fields(line), " "))
			return v, fmt.Sprintf("go test ./%s -run '^$' -bench '%s' -benchtime %s", strings.TrimPrefix(pkg, "."), pattern, r.benchFor), nil
		}
	}
	return 0, "", fmt.Errorf("%s %s: no benchmark line in output:\n%s", pkg, pattern, outb)
}

// pgbench runs pgbench and returns transactions per second and the average
// latency in milliseconds.
func (r *runner) pgbench(ctx context.Context, args ...string) (tps, latMS float64, cmdline string, err error) {
	full := append([]string{"-n", "-T", r.pgbenchT}, args...)
	outb, err := r.cmd(ctx, "pgbench", full...).Output()
	if err != nil {
		return 0, 0, "", fmt.Errorf("pgbench %v: %w", args, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(outb))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "tps = "); ok {
			tps, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
		if v, ok := strings.CutPrefix(line, "latency average = "); ok {
			latMS, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	if tps == 0 {
		return 0, 0, "", fmt.Errorf("pgbench %v: no tps in output:\n%s", args, outb)
	}
	fmt.Fprintf(r.log, "   pgbench %s: %.0f tps, %.3f ms\n", strings.Join(args, " "), tps, latMS)
	return tps, latMS, "pgbench " + strings.Join(full, " "), nil
}

// testBinary names the test binary of pkg.
func testBinary(pkg string) string {
	if pkg == "." {
		return "locktop.test"
	}
	return strings.ReplaceAll(pkg, "/", "_") + ".test"
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// spread is the range of per-round ratios, lowest to highest: how far one
// round's figure can be trusted on this machine today.
func spread(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f–%.2f", slices.Min(v), slices.Max(v))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func benchFile(name string) string { return filepath.Join("testdata", "bench", name) }

// lockCycle: one acquire + release from one client, against pgbench sending
// the same two statements over one connection (lock-cycle.sql), and a pinned
// reference: a bare pgx loop of those two statements (BenchmarkBareCycle),
// which no library on pgx can beat, so that a machine slower today shows as
// slower in all three, not as a regression of one. Budget: ratio of times
// <= 1.0. pgbench runs -M prepared because lockcore sends its statements as
// pgx does by default: the extended protocol with statements prepared once
// per connection (QueryExecModeCacheStatement).
func lockCycle(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var goNS, pgNS, refNS, ratios, refRatios, libRatios []float64
	var gocmd, pgcmd, refcmd string
	for range r.rounds {
		ref, rc, err := r.goBench(ctx, "lockcore", "^BenchmarkBareCycle$")
		if err != nil {
			return nil, err
		}
		ns, c, err := r.goBench(ctx, "lockcore", "^BenchmarkWithUncontended$")
		if err != nil {
			return nil, err
		}
		tps, _, pc, err := r.pgbench(ctx, "-M", "prepared", "-f", benchFile("lock-cycle.sql"), "-c", "1")
		if err != nil {
			return nil, err
		}
		gocmd, pgcmd, refcmd = c, pc, rc
		pg := 1e9 / tps
		goNS, pgNS, refNS = append(goNS, ns), append(pgNS, pg), append(refNS, ref)
		ratios, refRatios, libRatios = append(ratios, ns/pg), append(refRatios, ref/pg), append(libRatios, ns/ref)
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
			Name: "  lockcore against the pinned reference (what the library adds: fence, watch, bookkeeping)", Figure: us(goNS, "op"),
			Baseline: us(refNS, "op") + " (bare pgx)", Ratio: fmt.Sprintf("%.2f× the time", median(libRatios)), Spread: spread(libRatios),
			Budget: "—", Verdict: "—", Command: gocmd, Baseline2: refcmd,
		},
	}, nil
}

// contended: 8 goroutines on one key, against 8 pgbench clients on one key
// (contended.sql, -M prepared as above). Two figures in the same rounds:
// every grant through the server, as pgbench's are (the default; budget at
// least 0.9x pgbench's rate), and with the in-process hand-off on
// (lockcore.HandOff; budget at least 3x pgbench's rate).
func contended(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var srvRate, hoRate, pgRate, srvRatios, hoRatios []float64
	var srvcmd, hocmd, pgcmd string
	for range r.rounds {
		ns, c, err := r.goBench(ctx, "lockcore", "^BenchmarkWithContended8$")
		if err != nil {
			return nil, err
		}
		tps, _, pc, err := r.pgbench(ctx, "-M", "prepared", "-f", benchFile("contended.sql"), "-c", "8", "-j", "2")
		if err != nil {
			return nil, err
		}
		hns, hc, err := r.goBench(ctx, "lockcore", "^BenchmarkWithContended8HandOff$")
		if err != nil {
			return nil, err
		}
		srvcmd, hocmd, pgcmd = c, hc, pc
		srvRate, hoRate, pgRate = append(srvRate, 1e9/ns), append(hoRate, 1e9/hns), append(pgRate, tps)
		srvRatios, hoRatios = append(srvRatios, (1e9/ns)/tps), append(hoRatios, (1e9/hns)/tps)
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

func report(figs []figure, version string, r *runner) string {
	var b strings.Builder
	host, _ := os.Hostname()
	cpus := "?"
	if out, err := exec.Command("nproc").Output(); err == nil {
		cpus = strings.TrimSpace(string(out))
	}
	fmt.Fprintf(&b, `# Benchmarks

Written by `+"`make bench`"+` (cmd/benchreport) on %s: one throw-away PostgreSQL %s
cluster (fsync off, Unix socket) on %s, %s CPUs. Every project figure was taken beside
its baseline in %d alternating rounds of %s each; the table gives the medians, the ratio is
the median of the per-round ratios, and the spread is the lowest and the highest per-round
ratio. These machines are noisy (and often shared): read the ratios and their spread, not the
bare times, and compare the pinned reference (a bare pgx loop) between runs to see whether the
machine itself was slower.

| figure | project | baseline (physical limit) | ratio | spread of rounds | budget | verdict |
| --- | --- | --- | --- | --- | --- | --- |
`, time.Now().UTC().Format("2006-01-02 15:04 UTC"), version, host, cpus, r.rounds, r.benchFor)
	for _, f := range figs {
		sp := f.Spread
		if sp == "" {
			sp = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", f.Name, f.Figure, f.Baseline, f.Ratio, sp, f.Budget, f.Verdict)
	}
	b.WriteString("\n## Commands\n\nRun inside `bin/locktop cluster -- sh -c '...'` (sets `LOCKTOP_TEST_DSN` and `PG*`), from the repository root:\n\n")
	for _, f := range figs {
		fmt.Fprintf(&b, "- %s\n  - project: `%s`\n", strings.TrimSpace(f.Name), f.Command)
		switch {
		case f.Baseline2 != "" && f.Held > 0:
			fmt.Fprintf(&b, "  - baseline: `%s`, with %d advisory locks held by another session\n", f.Baseline2, f.Held)
		case f.Baseline2 != "":
			fmt.Fprintf(&b, "  - baseline: `%s`\n", f.Baseline2)
		}
	}
	b.WriteString(reading)
	return b.String()
}

// dashboard: one refresh of the dashboard at 10,000 held locks (and 20
// waiters): the monitor's poll, the snapshot through Update, a full render
// at 160x50. Budget: under 50 ms. The baseline is the bare pg_locks query
// at 10,000 locks, which no poll can beat.
func dashboard(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	var goNS, pgMS, ratios, uiNS []float64
	var gocmd, pgcmd, uicmd string
	for range r.rounds {
		ns, c, err := r.goBench(ctx, "internal/cli", `^BenchmarkDashboardRefresh10k$/^poll\+update\+render$`)
		if err != nil {
			return nil, err
		}
		ms, pc, err := r.barePoll(ctx, 10_000)
		if err != nil {
			return nil, err
		}
		un, uc, err := r.goBench(ctx, "ui", "^BenchmarkSnapshot10k$/^plain$")
		if err != nil {
			return nil, err
		}
		gocmd, pgcmd, uicmd = c, pc, uc
		goNS, pgMS, uiNS = append(goNS, ns), append(pgMS, ms), append(uiNS, un)
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
			Name: "  of which update + render alone (10,000 locks, 160×50, only visible rows drawn)", Figure: fmt.Sprintf("%.2f ms", median(uiNS)/1e6),
			Baseline: "—", Ratio: "—", Budget: "—", Verdict: "—", Command: uicmd,
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
	t0, c0, err := cpuTicks(pid)
	if err != nil {
		return nil, err
	}
	time.Sleep(measure)
	t1, c1, err := cpuTicks(pid)
	if err != nil {
		return nil, err
	}
	pct := 100 * (c1 - c0) / (t1.Sub(t0).Seconds() * clockTicks)
	fmt.Fprintf(r.log, "   dashboard at rest: %.2f%% of a core over %s\n", pct, measure)
	return []figure{{
		Name: "Dashboard at rest (1 s refresh, 10 locks, nothing changing)", Figure: fmt.Sprintf("%.2f%% of a core", pct),
		Baseline: "—", Ratio: "—", Budget: "< 1% of a core", Verdict: verdict(pct < 1),
		Command: "locktop --dsn DSN --interval 1s in tmux at 160×50; utime+stime from /proc/PID/stat over 30 s",
	}}, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times on Linux.
const clockTicks = 100

// cpuTicks reads a process's user+system CPU time, in clock ticks.
func cpuTicks(pid string) (time.Time, float64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("the dashboard is not running: %w", err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	f := strings.Fields(rest)
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return time.Now(), ut + st, nil
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
  it. Its ratio to pgbench says how the two clients compare on the machine today.
- **Lock cycle.** One acquire and one release are one round trip each: lock connections get
  their lock_timeout (and application_name) once per connection, so the acquire is one
  statement, pg_advisory_lock and the fencing token's nextval.
- **Contended hand-over.** On two cores the eight backends and the client share the CPU, so
  the client's CPU per hand-over decides the rate. Go's runtime spends more of it than
  pgbench's single-threaded loop (cross-thread wake-ups in the netpoller). The figure is taken
  at the default GOMAXPROCS, as users run it.
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
- **Dashboard.** Almost all of a 10,000-lock refresh is the poll; the dashboard renders only
  the rows that fit on the screen.
- **Simulator.** The scale scenario fires 1,000 hooks back to back onto its pools (a
  lock pool of 200 and the hook service's original work pool of 25), so its lock waits are mostly queueing for a connection,
  by design; what it must show is that no invariant breaks under that load.
`
