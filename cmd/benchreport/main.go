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
	flag.IntVar(&collectorTargets, "collector-targets", collectorTargets, "throw-away servers the collector watches (fewer on a loaded machine)")
	flag.StringVar(&collectorBaseline, "collector-baseline", "", "another locktop `binary` (an older build) to measure beside bin/locktop, alternating, on the collector's servers")
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
	// The test binaries, unless every step chosen runs locktop alone.
	tests := false
	for _, step := range steps {
		tests = tests || (!step.binOnly && (only == nil || only.MatchString(step.name)))
	}
	if tests {
		fmt.Fprintln(r.log, "building test binaries...")
	}
	for _, pkg := range benchPackages {
		if !tests {
			break
		}
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
	prev, err := readPrevious(out)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(report(figs, prev, version, r)), 0o644)
}

// benchPackages are the packages whose test binaries hold benchmarks
// (internal/cli has the dashboard's refresh benchmark).
var benchPackages = []string{"lockcore", "internal/source/pgsource", "ui", "internal/cli", "internal/record/recording", "internal/record/history", "internal/record/htmlreport"}

// only, if set (-only), selects the steps to run by name.
var only *regexp.Regexp

// steps are the measurements, in report order.
var steps = []struct {
	name    string
	run     func(context.Context, *runner, time.Duration) ([]figure, error)
	binOnly bool // runs bin/locktop alone: no test binary needed
}{
	{name: "lock cycle", run: lockCycle},
	{name: "contended hand-over", run: contended},
	{name: "order check", run: orderCheck},
	{name: "loss detection", run: loss},
	{name: "monitor poll", run: inspect},
	{name: "dashboard refresh", run: dashboard},
	{name: "dashboard at rest", run: idle},
	{name: "simulator at scale", run: simulator},
	{name: "simulator at scale: acf and fole", run: simSystems},
	{name: "recording size", run: recordingSize},
	{name: "history", run: history},
	{name: "HTML report", run: htmlReport},
	{name: "lease locks", run: leaseLocks},
	{name: "Redis session mutex", run: redisMutex},
	{name: "one pane", run: onePane},
	{name: "at rest beside pg_activity", run: restBeside},
	{name: "collector", run: collector, binOnly: true},
}

func (r *runner) cmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = r.root
	c.Env = r.env
	c.Stderr = r.log
	return c
}

var (
	benchLine   = regexp.MustCompile(`^(Benchmark\S+)\s+\d+\s+([0-9.]+) ns/op`)
	benchMetric = regexp.MustCompile(`([0-9.]+) ([A-Za-z-]+/[a-z]+)`)
)

// goBench runs one benchmark of a test binary and returns ns/op.
func (r *runner) goBench(ctx context.Context, pkg, pattern string) (float64, string, error) {
	res, err := r.goBenchRun(ctx, pkg, pattern)
	return res.ns, res.cmd, err
}

// benchResult is one benchmark line: ns/op, every metric by its unit
// (ns/op, cpu-ms/op, vcsw/op, ns/handover, requests/op, ...), and the
// command to rerun it.
type benchResult struct {
	ns      float64
	metrics map[string]float64
	cmd     string
}

// goBenchRun runs one benchmark of a test binary and returns its line.
func (r *runner) goBenchRun(ctx context.Context, pkg, pattern string) (benchResult, error) {
	args := []string{"-test.run", "^$", "-test.bench", pattern, "-test.benchtime", r.benchFor, "-test.count", "1"}
	c := r.cmd(ctx, filepath.Join(r.bin, testBinary(pkg)), args...)
	c.Dir = filepath.Join(r.root, pkg)
	outb, err := c.Output()
	if err != nil {
		return benchResult{}, fmt.Errorf("%s %s: %w\n%s", pkg, pattern, err, outb)
	}
	for _, line := range strings.Split(string(outb), "\n") {
		if m := benchLine.FindStringSubmatch(line); m != nil {
			res := benchResult{metrics: map[string]float64{},
				cmd: fmt.Sprintf("go test ./%s -run '^$' -bench '%s' -benchtime %s", strings.TrimPrefix(pkg, "."), pattern, r.benchFor)}
			res.ns, _ = strconv.ParseFloat(m[2], 64)
			for _, mm := range benchMetric.FindAllStringSubmatch(line, -1) {
				res.metrics[mm[2]], _ = strconv.ParseFloat(mm[1], 64)
			}
			fmt.Fprintln(r.log, "  ", strings.Join(strings.Fields(line), " "))
			return res, nil
		}
	}
	return benchResult{}, fmt.Errorf("%s %s: no benchmark line in output:\n%s", pkg, pattern, outb)
}

// pgbench runs pgbench and returns transactions per second and the average
// latency in milliseconds.
func (r *runner) pgbench(ctx context.Context, args ...string) (tps, latMS float64, cmdline string, err error) {
	res, err := r.pgbenchRun(ctx, args...)
	return res.tps, res.latMS, res.cmd, err
}

// pgbenchResult is one pgbench run: its rate, its average latency, the
// client's own CPU (user and system, every thread) per transaction, and
// the command line.
type pgbenchResult struct {
	tps, latMS float64
	cpuPerTxn  float64 // ns
	vcswPerTxn float64 // voluntary context switches
	cmd        string
}

// pgbenchRun runs pgbench and reads its report and its CPU time.
func (r *runner) pgbenchRun(ctx context.Context, args ...string) (pgbenchResult, error) {
	full := append([]string{"-n", "-T", r.pgbenchT}, args...)
	c := r.cmd(ctx, "pgbench", full...)
	outb, err := c.Output()
	if err != nil {
		return pgbenchResult{}, fmt.Errorf("pgbench %v: %w", args, err)
	}
	res := pgbenchResult{cmd: "pgbench " + strings.Join(full, " ")}
	var txns float64
	sc := bufio.NewScanner(bytes.NewReader(outb))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "tps = "); ok {
			res.tps, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
		if v, ok := strings.CutPrefix(line, "latency average = "); ok {
			res.latMS, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
		if v, ok := strings.CutPrefix(line, "number of transactions actually processed: "); ok {
			txns, _ = strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	if res.tps == 0 {
		return pgbenchResult{}, fmt.Errorf("pgbench %v: no tps in output:\n%s", args, outb)
	}
	if ps := c.ProcessState; ps != nil && txns > 0 {
		res.cpuPerTxn = float64(ps.UserTime()+ps.SystemTime()) / txns
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.vcswPerTxn = float64(ru.Nvcsw) / txns
		}
	}
	fmt.Fprintf(r.log, "   pgbench %s: %.0f tps, %.3f ms, %.1f µs CPU/txn\n", strings.Join(args, " "), res.tps, res.latMS, res.cpuPerTxn/1e3)
	return res, nil
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

func report(figs []figure, prev previous, version string, r *runner) string {
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
	rows, kept := prev.merge(figs)
	for _, row := range rows {
		b.WriteString(row + "\n")
	}
	if prev.sections != "" {
		b.WriteString("\n" + prev.sections + "\n")
	}
	b.WriteString("\n## Commands\n\nRun inside `bin/locktop cluster -- sh -c '...'` (sets `LOCKTOP_TEST_DSN` and `PG*`), from the repository root:\n\n")
	for _, c := range kept {
		b.WriteString(c)
	}
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
