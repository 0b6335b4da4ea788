package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktop/locktop/internal/testenv/redisserver"
)

// redisPkg holds the session mutex and its benchmarks.
const redisPkg = "lockcore/redislock"

// redisMutex measures the Redis session mutex (issue 10) on a throw-away
// redis-server of its own, beside redis-benchmark on the same server:
//   - acquire + release, uncontended, against redis-benchmark sending the
//     very two commands the lock sends (captured with MONITOR). Budget:
//     ratio of times <= 1.2. Beside it the pinned reference, a bare
//     go-redis loop of the same two scripts (what go-redis and the Go
//     runtime cost beside redis-benchmark), and what the library adds,
//     the two in turn in one loop (BenchmarkAcquireReleaseInterleaved).
//   - hand-over latency among 8 goroutines on one key (from the start of a
//     release to the next holder's acquire returning, every grant to a
//     goroutine already waiting), against one round trip (the physical
//     limit: redis-benchmark's PING) and against bsm/redislock, whose
//     waiters poll with LinearBackoff. Budget: >= 5x faster than
//     bsm/redislock with LinearBackoff(10ms).
func redisMutex(ctx context.Context, r *runner, _ time.Duration) ([]figure, error) {
	bin := filepath.Join(r.bin, testBinary(redisPkg))
	if err := r.cmd(ctx, "go", "test", "-c", "-o", bin, "./"+redisPkg).Run(); err != nil {
		return nil, fmt.Errorf("building %s benchmarks: %w", redisPkg, err)
	}
	fmt.Fprintln(r.log, "starting a throw-away Redis...")
	srv, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	env := r.env
	r.env = append(slices.Clip(env), "LOCKTOP_TEST_REDIS="+srv.URL(), "REDIS_URL="+srv.URL())
	defer func() { r.env = env }()
	rb := &redisBench{r: r, bin: bin, sock: srv.Socket()}

	acquire, release, err := rb.capture(ctx)
	if err != nil {
		return nil, err
	}
	var cycleNS, baseNS, ratios []float64
	var bareNS, bareRatios, overBare, pairLib, pairBare []float64
	var cpu clientCPU
	var gocmd, barecmd, acqcmd, relcmd, paircmd string
	for range r.rounds {
		lib, err := r.goBenchRun(ctx, redisPkg, "^BenchmarkAcquireRelease$")
		if err != nil {
			return nil, err
		}
		bare, err := r.goBenchRun(ctx, redisPkg, "^BenchmarkAcquireReleaseBare$")
		if err != nil {
			return nil, err
		}
		ab, err := rb.redisBenchmarkRun(ctx, randomKey(acquire))
		if err != nil {
			return nil, err
		}
		rb2, err := rb.redisBenchmarkRun(ctx, randomKey(release))
		if err != nil {
			return nil, err
		}
		pair, err := r.goBenchRun(ctx, redisPkg, "^BenchmarkAcquireReleaseInterleaved$")
		if err != nil {
			return nil, err
		}
		m, mb, a, rel := lib.metrics, bare.metrics, ab.ns, rb2.ns
		gocmd, barecmd, acqcmd, relcmd, paircmd = lib.cmd, bare.cmd, ab.cmd, rb2.cmd, pair.cmd
		cpu.add(lib, bare, ab.cpu+rb2.cpu, ab.sw+rb2.sw)
		cycleNS, baseNS = append(cycleNS, m["ns/op"]), append(baseNS, a+rel)
		ratios = append(ratios, m["ns/op"]/(a+rel))
		bareNS, bareRatios = append(bareNS, mb["ns/op"]), append(bareRatios, mb["ns/op"]/(a+rel))
		overBare, pairLib, pairBare = append(overBare, pair.metrics["lib/bare"]), append(pairLib, pair.metrics["lib-ns/cycle"]), append(pairBare, pair.metrics["bare-ns/cycle"])
	}
	figs := []figure{{
		Name: "Redis session mutex: acquire + release, uncontended", Figure: fmt.Sprintf("%.1f µs/op", median(cycleNS)/1e3),
		Baseline: fmt.Sprintf("%.1f µs (redis-benchmark, the same two commands)", median(baseNS)/1e3),
		Ratio:    fmt.Sprintf("%.2f× the time", median(ratios)), Spread: spread(ratios), Budget: "≤ 1.2×", Verdict: verdict(median(ratios) <= 1.2),
		Command: gocmd, Baseline2: acqcmd + "` plus `" + relcmd,
	}, {
		Name:   "  pinned reference: a bare go-redis loop of the same two scripts, one client",
		Figure: fmt.Sprintf("%.1f µs/op", median(bareNS)/1e3), Baseline: fmt.Sprintf("%.1f µs (redis-benchmark, the same two commands)", median(baseNS)/1e3),
		Ratio: fmt.Sprintf("%.2f× the time", median(bareRatios)), Spread: spread(bareRatios), Budget: "—", Verdict: "—",
		Command: barecmd, Baseline2: acqcmd + "` plus `" + relcmd,
	}, {
		Name:   "  the mutex against the pinned reference (what the library adds: held set, order check, wait context, Lock, metrics)",
		Figure: fmt.Sprintf("%.1f µs/op", median(pairLib)/1e3), Baseline: fmt.Sprintf("%.1f µs/op (bare go-redis, the two in turn in one loop)", median(pairBare)/1e3),
		Ratio: fmt.Sprintf("%.2f× the time", median(overBare)), Spread: spread(overBare), Budget: "—", Verdict: "—",
		Command: paircmd, Baseline2: paircmd,
	},
		cpu.figure("  redislock's client CPU per cycle beside redis-benchmark's (user + system, every thread), and voluntary context switches", "redislock", "redis-benchmark", gocmd, acqcmd+"` plus `"+relcmd),
	}

	variants := []string{"redislock", "bsm-linear-1ms", "bsm-linear-10ms", "bsm-linear-100ms"}
	grant := map[string][]float64{}
	reqs := map[string][]float64{}
	cmds := map[string]string{}
	var rtt []float64
	var pingcmd string
	for range r.rounds {
		for _, v := range variants {
			m, c, err := rb.goBench(ctx, "^BenchmarkHandOver8$/^"+v+"$")
			if err != nil {
				return nil, err
			}
			grant[v], reqs[v], cmds[v] = append(grant[v], m["ns/handover"]), append(reqs[v], m["requests/op"]), c
		}
		ns, pc, err := rb.redisBenchmark(ctx, []string{"PING"})
		if err != nil {
			return nil, err
		}
		rtt, pingcmd = append(rtt, ns), pc
	}
	ours := median(grant["redislock"])
	figs = append(figs, figure{
		Name:     "Redis session mutex: hand-over latency, 8 goroutines on one key (release → next holder)",
		Figure:   fmt.Sprintf("%.1f µs, %.1f requests/grant", ours/1e3, median(reqs["redislock"])),
		Baseline: fmt.Sprintf("%.1f µs (one round trip: redis-benchmark PING)", median(rtt)/1e3),
		Ratio:    fmt.Sprintf("%.2f× the time", ours/median(rtt)), Budget: "—", Verdict: "—",
		Command: cmds["redislock"], Baseline2: pingcmd,
	})
	for _, v := range variants[1:] {
		theirs := median(grant[v])
		backoff := strings.TrimPrefix(v, "bsm-linear-")
		f := figure{
			Name:     "  against bsm/redislock, LinearBackoff(" + backoff + ")",
			Figure:   fmt.Sprintf("%.1f µs", ours/1e3),
			Baseline: fmt.Sprintf("%.1f µs, %.1f requests/grant", theirs/1e3, median(reqs[v])),
			Ratio:    fmt.Sprintf("%.1f× faster", theirs/ours), Budget: "—", Verdict: "—",
			Command: cmds["redislock"], Baseline2: cmds[v],
		}
		if backoff == "10ms" {
			f.Budget, f.Verdict = "≥ 5×", verdict(theirs/ours >= 5)
		}
		figs = append(figs, f)
	}
	return figs, nil
}

type redisBench struct {
	r    *runner
	bin  string
	sock string
}

// goBench runs one benchmark of the redislock test binary and returns its
// metrics (ns/op, ns/handover, requests/op, cpu-ms/op, vcsw/op).
func (rb *redisBench) goBench(ctx context.Context, pattern string) (map[string]float64, string, error) {
	res, err := rb.r.goBenchRun(ctx, redisPkg, pattern)
	return res.metrics, res.cmd, err
}

// capture runs a few acquire+release cycles under MONITOR and returns the
// two commands the lock sent for the last one: what redis-benchmark then
// sends, so the baseline is the same commands, not similar ones.
func (rb *redisBench) capture(ctx context.Context) (acquire, release []string, err error) {
	mctx, stop := context.WithCancel(ctx)
	mon := exec.CommandContext(mctx, "redis-cli", "-s", rb.sock, "monitor")
	out, err := mon.StdoutPipe()
	if err != nil {
		stop()
		return nil, nil, err
	}
	if err := mon.Start(); err != nil {
		stop()
		return nil, nil, fmt.Errorf("redis-cli monitor: %w", err)
	}
	lines := make(chan []string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if args := monitorArgs(sc.Text()); len(args) > 0 {
				select {
				case lines <- args:
				default:
				}
			}
		}
	}()
	// MONITOR answers +OK once it is on; give it a moment to attach.
	time.Sleep(200 * time.Millisecond)
	c := rb.r.cmd(ctx, rb.bin, "-test.run", "^$", "-test.bench", "^BenchmarkAcquireRelease$", "-test.benchtime", "20x")
	c.Dir = filepath.Join(rb.r.root, redisPkg)
	if b, err := c.Output(); err != nil {
		stop()
		_ = mon.Wait()
		return nil, nil, fmt.Errorf("capturing the lock's commands: %w\n%s", err, b)
	}
	time.Sleep(200 * time.Millisecond) // let MONITOR print the last commands
	stop()
	_ = mon.Wait()
	for args := range lines {
		if len(args) < 3 || !strings.EqualFold(args[0], "evalsha") || args[2] != "4" {
			continue
		}
		switch len(args) {
		case 3 + 4 + 6:
			acquire = args
		case 3 + 4 + 1:
			release = args
		}
	}
	if acquire == nil || release == nil {
		return nil, nil, fmt.Errorf("MONITOR showed no acquire and release (EVALSHA with 4 keys)")
	}
	fmt.Fprintf(rb.r.log, "   the lock's commands: %s | %s\n", strings.Join(acquire, " "), strings.Join(release, " "))
	return acquire, release, nil
}

// randomKey puts __rand_int__ into the hold key (the first key), so every
// acquire finds a free key, as in the uncontended cycle. (Each release then
// finds no hold: its cheaper path, which favours the baseline.)
func randomKey(args []string) []string {
	out := slices.Clone(args)
	out[3] += ":__rand_int__"
	return out
}

// redisBenchmark runs redis-benchmark with one client sending args, and
// returns the time per command in ns.
func (rb *redisBench) redisBenchmark(ctx context.Context, args []string) (float64, string, error) {
	res, err := rb.redisBenchmarkRun(ctx, args)
	return res.ns, res.cmd, err
}

// redisBenchResult is one redis-benchmark run: the time per command, the
// client's own CPU (ns, user and system) and voluntary context switches
// per command, and the command line.
type redisBenchResult struct {
	ns, cpu, sw float64
	cmd         string
}

// redisBenchmarkRun runs redis-benchmark with one client sending args.
func (rb *redisBench) redisBenchmarkRun(ctx context.Context, args []string) (redisBenchResult, error) {
	n := max(20000, int(rb.r.benchSeconds()*25000))
	full := append([]string{"-s", rb.sock, "-c", "1", "-n", strconv.Itoa(n), "-r", "100000000", "--csv"}, args...)
	c := rb.r.cmd(ctx, "redis-benchmark", full...)
	out, err := c.Output()
	if err != nil {
		return redisBenchResult{}, fmt.Errorf("redis-benchmark %s: %w", strings.Join(args, " "), err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(out))).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[1]) < 2 {
		return redisBenchResult{}, fmt.Errorf("redis-benchmark %s: unexpected output %q", strings.Join(args, " "), out)
	}
	rps, err := strconv.ParseFloat(recs[1][1], 64)
	if err != nil || rps <= 0 {
		return redisBenchResult{}, fmt.Errorf("redis-benchmark %s: no rate in %q", strings.Join(args, " "), out)
	}
	res := redisBenchResult{ns: 1e9 / rps}
	if ps := c.ProcessState; ps != nil {
		res.cpu = float64(ps.UserTime()+ps.SystemTime()) / float64(n)
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			res.sw = float64(ru.Nvcsw) / float64(n)
		}
	}
	fmt.Fprintf(rb.r.log, "   redis-benchmark %s: %.0f/s, %.1f µs CPU/command\n", shortArgs(args), rps, res.cpu/1e3)
	quoted := make([]string, len(full))
	for i, a := range full {
		quoted[i] = shellQuote(a)
	}
	quoted[1] = `"${REDIS_URL#unix://}"`
	res.cmd = "redis-benchmark " + strings.Join(quoted, " ")
	return res, nil
}

func (r *runner) benchSeconds() float64 {
	d, err := time.ParseDuration(r.benchFor)
	if err != nil {
		return 5
	}
	return d.Seconds()
}

func shortArgs(args []string) string {
	if len(args) > 2 {
		return args[0] + " " + args[1][:min(8, len(args[1]))] + "…"
	}
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// monitorArgs parses a MONITOR line, `1700000000.123456 [0 unix:/p] "cmd"
// "arg" ...`, into its arguments (sdscatrepr quoting: \" \\ \n \r \t \a \b
// \xHH).
func monitorArgs(line string) []string {
	i := strings.Index(line, "] ")
	if i < 0 {
		return nil
	}
	s := line[i+2:]
	var args []string
	for len(s) > 0 {
		if s[0] == ' ' {
			s = s[1:]
			continue
		}
		if s[0] != '"' {
			return nil
		}
		var b strings.Builder
		j := 1
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] != '\\' || j+1 >= len(s) {
				b.WriteByte(s[j])
				continue
			}
			j++
			switch s[j] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if j+2 < len(s) {
					v, _ := strconv.ParseUint(s[j+1:j+3], 16, 8)
					b.WriteByte(byte(v))
					j += 2
				}
			default:
				b.WriteByte(s[j])
			}
		}
		args = append(args, b.String())
		if j >= len(s) {
			break
		}
		s = s[j+1:]
	}
	return args
}
